#pragma once
/// \file
/// Fill a device matrix from an AnnData file, one row block at a time: host memory never
/// holds more than one block beyond X's final home.

#include <cstddef>

#include "knmf/io/h5ad.hpp"
#include "knmf/matrix/csr_matrix.hpp"
#include "knmf/matrix/dense_matrix.hpp"

namespace knmf {

/// Default size of one host staging block.
inline constexpr std::size_t default_load_block_bytes = std::size_t(64) << 20;

/// X of `reader` (any storage format on disk) as a dense device matrix of T, validated
/// (finite, non-negative, not empty) with the file name in every message.
template <class T>
DenseMatrix<T> load_dense(const ExecSpace& space, const io::H5adReader& reader,
                          std::size_t block_bytes = default_load_block_bytes);

/// X of `reader` (any storage format on disk) as a sparse device matrix of T (explicit zeros
/// of a sparse file are kept; zeros of a dense file are dropped), validated likewise. Blocks
/// hold about `block_bytes` of entries.
template <class T>
CsrMatrix<T> load_csr(const ExecSpace& space, const io::H5adReader& reader,
                      std::size_t block_bytes = default_load_block_bytes);

/// Rows [r0, r1) of X only (a rank's block of a row-partitioned X; may be empty), validated
/// likewise, statistics of the block.
template <class T>
DenseMatrix<T> load_dense_rows(const ExecSpace& space, const io::H5adReader& reader,
                               std::int64_t r0, std::int64_t r1,
                               std::size_t block_bytes = default_load_block_bytes);
template <class T>
CsrMatrix<T> load_csr_rows(const ExecSpace& space, const io::H5adReader& reader, std::int64_t r0,
                           std::int64_t r1, std::size_t block_bytes = default_load_block_bytes);

/// Stored entries of X in the file (for a dense file: its nonzeros, counted in one pass).
std::int64_t count_nonzeros(const io::H5adReader& reader,
                            std::size_t block_bytes = default_load_block_bytes);

}  // namespace knmf
