#pragma once
/// \file
/// The count files `cnmf prepare -c` reads, opened as a prepare::CountSource (row blocks of
/// the cells x genes matrix, float32 counts). Which reader is chosen by the name, as cNMF:
///
///  * `*.h5ad`: AnnData X (dense, CSR or CSC), streamed through io::H5adReader.
///  * `*.mtx`, `*.mtx.gz`: a 10x Matrix Market folder, scanpy's `read_10x_mtx` (what cNMF
///    calls with the file's folder): the matrix is genes x cells (transposed here), beside it
///    `features.tsv[.gz]` (Cell Ranger >= 3; only rows of type "Gene Expression" are kept,
///    scanpy's gex_only) or `genes.tsv[.gz]` (Cell Ranger 2), and `barcodes.tsv[.gz]`. The
///    genes are named by their symbol (column 2) made unique the AnnData way (the second
///    'X' becomes 'X-1', ...), the cells by their barcode. Held in memory as CSR (12 bytes
///    per entry while it is read), never dense.
///  * `*.h5`: a 10x Cell Ranger HDF5 matrix (scanpy's `read_10x_h5`, not read by cNMF):
///    group `matrix/` with data, indices, indptr and shape (genes x cells stored by cell, so
///    the CSR of cells x genes, streamed by rows), `features/name` and `features/feature_type`
///    (v3, gene expression rows only) or `genes`/`gene_names` (v2), `barcodes`.
///  * `*.npz`: a pandas DataFrame saved by cNMF's save_df_to_npz (cells x genes).
///  * anything else: a tab-separated table as `pd.read_csv(path, sep='\t', index_col=0)`:
///    a header of the index name then the gene names, one line per cell (its name then one
///    value per gene). Duplicate gene names are renamed as pandas does ('X', 'X.1', ...).
/// gzip (.gz) is read through zlib. Counts are converted to float32 (what the h5ad path
/// reads), so the same integer counts give the same outputs in every format.
/// Every problem is a one-line knmf::InputError naming the file, the line or dataset and
/// the value.

#include <memory>
#include <string>
#include <vector>

#include "knmf/prepare/prepare.hpp"

namespace knmf::prepare {

enum class CountFormat { H5ad, TenxMtx, TenxH5, DfNpz, Tsv };

/// The format `path` is read as (by its name, see the file comment).
CountFormat count_format(const std::string& path);
/// "h5ad", "10x mtx", "10x h5", "df.npz", "tsv".
const char* to_string(CountFormat f);

/// An opened count file: keeps what its CountSource reads from alive (copyable, shared).
class CountFile {
public:
  /// Open and check `path`. `densify`: read the whole matrix into one dense cells x genes
  /// array first (cNMF's --densify; the outputs are the same). `block_rows`: rows per read.
  static CountFile open(const std::string& path, bool densify = false,
                        std::int64_t block_rows = 16384);

  const CountSource& source() const { return source_; }
  CountFormat format() const { return format_; }

  struct State;  ///< internal

private:
  std::shared_ptr<State> state_;
  CountSource source_;
  CountFormat format_ = CountFormat::H5ad;
};

/// AnnData's `make_index_unique` (`var_names_make_unique`): each repeated name gets
/// "-1", "-2", ... (the first occurrence is kept), skipping suffixes that are names already.
std::vector<std::string> make_names_unique(std::vector<std::string> names);

}  // namespace knmf::prepare
