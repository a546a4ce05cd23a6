"""`pip install --no-build-isolation .`: setuptools drives CMake (pyproject.toml, docs/install.md).

1. Kokkos + Kokkos Kernels: the prefix cmake/bootstrap.sh keeps in ~/.cache/knmf-deps (reused,
   or built there once from the release tarballs), found with `bootstrap.sh --prefix-only`,
   which installs no Debian package and changes nothing outside the cache. KNMF_KOKKOS_ROOT
   names another Kokkos (and Kokkos Kernels) prefix instead.
2. knmf's library and its Python module (`knmf._knmf`) in build-python/ (CMake, Ninja, ccache
   when installed: the same options and folder depth as `cmake/dev.sh build`, so its compiler
   cache serves both); only the module's target is built.
3. The module and python/knmf/*.py go into the wheel pip installs (and `pip uninstall knmf`
   removes).

Environment: KNMF_DEPS_CACHE, KNMF_DEPS_MIRROR, KNMF_BUILD_JOBS, KNMF_CCACHE=0 as for
cmake/dev.sh; KNMF_CMAKE_ARGS (extra configure arguments); KNMF_KOKKOS_ROOT.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
# One folder below the checkout, as cmake/dev.sh's build/: ccache rewrites paths under
# CCACHE_BASEDIR relative to the build folder, so equal depths give equal compile commands.
BUILD_DIR = os.path.join(HERE, "build-python")


def version():
    """The one version of knmf: CMakeLists.txt's project(knmf VERSION ...)."""
    with open(os.path.join(HERE, "CMakeLists.txt")) as f:
        m = re.search(r"project\(knmf VERSION ([0-9.]+)", f.read())
    if not m:
        fail("CMakeLists.txt names no project(knmf VERSION ...)")
    return m.group(1)


def fail(message):
    sys.exit(f"knmf: {message}")


def kokkos_prefix():
    if os.environ.get("KNMF_KOKKOS_ROOT"):
        return os.environ["KNMF_KOKKOS_ROOT"]
    r = subprocess.run([os.path.join(HERE, "cmake", "bootstrap.sh"), "--prefix-only"],
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        fail("cmake/bootstrap.sh --prefix-only found or built no Kokkos prefix (its messages above)")
    return r.stdout.strip().splitlines()[-1]


class CMakeBuild(build_ext):
    """Builds knmf._knmf with CMake and copies it where setuptools packs the extension."""

    def build_extension(self, ext):
        for tool in ("cmake", "ninja"):
            if shutil.which(tool) is None:
                fail(f"building the module needs {tool} (Debian: apt-get install cmake ninja-build; "
                     "cmake/bootstrap.sh installs every package knmf builds against)")
        prefix = kokkos_prefix()
        env = dict(os.environ)
        args = ["-G", "Ninja", "-S", HERE, "-B", BUILD_DIR, "-DCMAKE_BUILD_TYPE=Release",
                f"-DKokkos_ROOT={prefix}", f"-DKokkosKernels_ROOT={prefix}",
                "-DKNMF_ENABLE_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}",
                "-DKNMF_ENABLE_TESTS=OFF", "-DKNMF_ENABLE_PERF=OFF", "-DKNMF_ENABLE_DRIVER=OFF",
                # the library as cmake/dev.sh builds it (MPI on when Open MPI is there): the
                # same objects, so the same compiler-cache entries
                "-DKNMF_ENABLE_MPI=" + ("ON" if shutil.which("mpicxx") else "OFF")]
        if shutil.which("ccache") and env.get("KNMF_CCACHE", "1") != "0":
            args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
            env["CCACHE_BASEDIR"] = HERE  # this checkout, whatever a caller (cmake/dev.sh) set
            env.setdefault("CCACHE_NOHASHDIR", "true")
        args += shlex.split(env.get("KNMF_CMAKE_ARGS", ""))
        jobs = env.get("KNMF_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake"] + args, check=True, env=env)
        subprocess.run(["cmake", "--build", BUILD_DIR, "-j", jobs, "--target", "knmf_python"],
                       check=True, env=env)
        built = os.path.join(BUILD_DIR, "python", "knmf")
        modules = [f for f in os.listdir(built) if f.startswith("_knmf.") and f.endswith(".so")]
        if len(modules) != 1:
            fail(f"expected one _knmf.*.so in {built}, found {modules}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built, modules[0]), target)


cmdclass = {"build_ext": CMakeBuild}
try:  # setuptools 64 and newer: PEP 660 editable installs go through this command
    from setuptools.command.editable_wheel import editable_wheel

    class NoEditable(editable_wheel):
        def run(self):
            fail("pip install -e is not supported (the module is a CMake build): use "
                 "`pip install --no-build-isolation .`, or PYTHONPATH=build/python after cmake/dev.sh build")

    cmdclass["editable_wheel"] = NoEditable
except ImportError:
    pass

setup(
    version=version(),
    packages=["knmf"],
    package_dir={"knmf": "python/knmf"},
    ext_modules=[Extension("knmf._knmf", sources=[])],
    cmdclass=cmdclass,
    options={"build": {"build_base": os.path.join("build-python", "setuptools")},
             "egg_info": {"egg_base": "build-python"}},
)
