# Spack recipe for knmf (Spack 1.x, package repository API v2).
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *

# This recipe lives inside the knmf checkout (spack/spack_repo/knmf/packages/knmf/), so the
# checkout itself is the source: there is no public release or web site yet. Set KNMF_GIT to
# another clone (a URL or a path) to build from there instead.
_checkout = os.path.abspath(os.path.join(os.path.dirname(__file__), *([os.pardir] * 5)))


class Knmf(CMakePackage, CudaPackage):
    """Batched consensus NMF (cNMF) factorization on Kokkos: many (k, replicate) NMF
    solves at once on a GPU (CUDA) or the CPU cores (OpenMP), with an HPC driver."""

    homepage = "file://" + _checkout
    git = os.environ.get("KNMF_GIT", "file://" + _checkout)

    version("main", branch="main")

    variant("openmp", default=True, description="Kokkos OpenMP backend on the host")
    variant("mpi", default=False, description="Distribute jobs or rows of X over MPI ranks")
    variant("python", default=False,
            description="The Python module `import knmf` (pybind11; docs/python.md)")

    depends_on("c", type="build")  # FindHDF5 test-compiles with the C compiler
    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")

    # Kokkos 4.5-4.7: the releases knmf is written to (include/knmf/core/compat.hpp refuses
    # older ones; cmake/bootstrap.sh and CI build 4.6.01), with Hopper (cuda_arch=90) support;
    # kokkos-kernels@X always pairs with kokkos@X.
    depends_on("kokkos@4.5:4.7")
    depends_on("kokkos-kernels@4.5:4.7")
    # ETI for the types knmf uses (float and double, LayoutLeft, int ordinals, size_t offsets:
    # the defaults cover the last three); anything else still compiles, only slower.
    depends_on("kokkos-kernels scalars=float,double")

    depends_on("kokkos+openmp", when="+openmp")
    depends_on("kokkos-kernels+openmp", when="+openmp")

    # A CPU build: no CUDA anywhere in the stack, host BLAS behind KokkosBlas.
    depends_on("kokkos~cuda", when="~cuda")
    depends_on("kokkos-kernels~cuda+blas", when="~cuda")

    # A GPU build: Kokkos supports one cuda_arch per build; forward knmf's to both.
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(
            f"kokkos+cuda+cuda_lambda+wrapper cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}"
        )
        depends_on(
            f"kokkos-kernels+cuda+cublas+cusparse cuda_arch={_arch}",
            when=f"+cuda cuda_arch={_arch}",
        )
    conflicts("+cuda", when="cuda_arch=none", msg="knmf +cuda needs a cuda_arch, e.g. 80 or 90")

    depends_on("hdf5@1.10: ~mpi", when="~mpi")
    depends_on("hdf5@1.10: +mpi", when="+mpi")
    depends_on("mpi", when="+mpi")
    depends_on("zlib-api")
    depends_on("yaml-cpp")
    depends_on("lapack")  # NNDSVD init's host LU/QR/SVD (dgetrf, dgeqrf, dorgqr, dgesdd)
    depends_on("cairo+png+ft+fc")  # PNG figures of consensus / k-selection (text via FreeType)
    depends_on("cli11", type="build")  # header-only, used by the driver
    depends_on("nlohmann-json", type="build")  # header-only: --log-json, test goldens

    depends_on("googletest", type="test")

    # the Python module, installed into the prefix's site-packages folder
    extends("python", when="+python")
    depends_on("python@3.8:", when="+python", type=("build", "link", "run"))
    depends_on("py-pybind11@2.11:", when="+python", type="build")  # 2.11: Pythons from 3.12
    depends_on("py-numpy", when="+python", type=("build", "run"))
    depends_on("py-scipy", when="+python", type="run")  # sparse input

    def cmake_args(self):
        return [
            # nvcc_wrapper for +cuda (kokkos+wrapper), Spack's C++ compiler otherwise.
            self.define("CMAKE_CXX_COMPILER", self["kokkos"].kokkos_cxx),
            self.define("Kokkos_ROOT", self.spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", self.spec["kokkos-kernels"].prefix),
            self.define_from_variant("KNMF_ENABLE_MPI", "mpi"),
            self.define("KNMF_ENABLE_TESTS", self.run_tests),
            self.define("KNMF_ENABLE_PERF", False),
            self.define("KNMF_ENABLE_DRIVER", True),
            self.define_from_variant("KNMF_ENABLE_PYTHON", "python"),
        ] + (
            [self.define("Python_EXECUTABLE", self.spec["python"].command.path)]
            if self.spec.satisfies("+python")
            else []
        )

    def check(self):
        """``spack install --test=root knmf``: the library's ctest suite (a +cuda build needs
        a GPU on the build node). Repository self-checks (label packaging) are left out."""
        with working_dir(self.build_directory):
            ctest = Executable(self.spec["cmake"].prefix.bin.ctest)
            ctest("--output-on-failure", "--label-exclude", "packaging")
