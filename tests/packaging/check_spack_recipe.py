"""Checks knmf's Spack recipe and spack.yaml without Spack (Spack cannot run on these machines).

    /usr/bin/python3 tests/packaging/check_spack_recipe.py [REPO_ROOT]

The recipe is imported against small stand-ins for ``spack.package`` and
``spack_repo.builtin.build_systems.{cmake,cuda}`` whose directives (version, variant,
depends_on, conflicts, ...) only record their arguments. The recorded directives are then
evaluated for concrete variant choices (e.g. +cuda cuda_arch=90, +mpi) and compared with what
the CMake project needs (find_package calls, options, cmake_minimum_required) and with the
specs in spack.yaml. Needs PyYAML; fails (never skips) without it. Exit status 0 = all good.
"""

import contextlib
import importlib.util
import os
import re
import sys
import types

import yaml  # Debian: python3-yaml

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
RECIPE = os.path.join(ROOT, "spack", "spack_repo", "knmf", "packages", "knmf", "package.py")

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
    return cond


# ---------------------------------------------------------------------------------------------
# Spec strings: the subset of Spack's syntax the recipe and spack.yaml use.
# "kokkos@4.5:4.7+cuda+wrapper cuda_arch=80 ^kokkos-kernels+cublas" ->
#   [{name, version, variants}, ...] (root first, then each ^dependency)
# ---------------------------------------------------------------------------------------------
_NODE = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*)?(?P<ver>@=?[0-9A-Za-z.:_-]*)?"
                   r"(?P<flags>(?:[+~][a-z][a-z0-9_]*)*)$")
_KV = re.compile(r"^(?P<key>[a-z][a-z0-9_]*)=(?P<value>[A-Za-z0-9_.,]+)$")


def parse_spec(text):
    nodes = [{"name": None, "version": None, "variants": {}}]
    for tok in text.replace("^", " ^ ").split():
        if tok == "^":
            nodes.append({"name": None, "version": None, "variants": {}})
            continue
        node = nodes[-1]
        kv = _KV.match(tok)
        if kv:
            vals = kv.group("value").split(",")
            node["variants"][kv.group("key")] = vals[0] if len(vals) == 1 else tuple(vals)
            continue
        m = _NODE.match(tok)
        if not m or not tok:
            raise ValueError(f"cannot parse spec token {tok!r} in {text!r}")
        if m.group("name"):
            if node["name"] is not None:
                raise ValueError(f"two names in one node of {text!r}")
            node["name"] = m.group("name")
        if m.group("ver"):
            node["version"] = m.group("ver")[1:]
        for f in re.findall(r"[+~][a-z][a-z0-9_]*", m.group("flags") or ""):
            node["variants"][f[1:]] = f[0] == "+"
    return nodes


def node_satisfies(values, constraint):
    """values: variant -> value of a configuration; constraint: variants of one spec node."""
    for key, want in constraint.items():
        have = values.get(key)
        if isinstance(want, bool):
            if bool(have) != want:
                return False
        elif isinstance(want, tuple):
            have_set = set(have) if isinstance(have, tuple) else {have}
            if not set(want) <= have_set:
                return False
        elif have != want:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Stand-ins for Spack's modules
# ---------------------------------------------------------------------------------------------
class Directive:
    def __init__(self, kind, args, kwargs, when):
        self.kind, self.args, self.kwargs, self.when = kind, args, kwargs, when

    def __repr__(self):
        return f"{self.kind}{self.args} when={self.when!r} {self.kwargs}"


recorded = []
when_stack = []


def _combine_when(extra):
    parts = [w for w in when_stack + [extra] if w]
    return " ".join(parts) if parts else None


def _directive(kind):
    def record(*args, **kwargs):
        when = kwargs.pop("when", None)
        recorded.append(Directive(kind, args, kwargs, _combine_when(when)))
    record.__name__ = kind
    return record


@contextlib.contextmanager
def when(condition):
    when_stack.append(condition)
    try:
        yield
    finally:
        when_stack.pop()


class FakeVariantValue:
    def __init__(self, value):
        self.value = value


class FakePrefix(str):
    def __getattr__(self, name):
        return FakePrefix(os.path.join(self, name))


class FakeDependency:
    def __init__(self, name, cxx=None):
        self.name = name
        self.prefix = FakePrefix(f"/opt/fake/{name}")
        self.package = types.SimpleNamespace(kokkos_cxx=cxx or f"/opt/fake/{name}/bin/c++")


class FakeSpec:
    """A concretized knmf spec: its own variants plus fake dependency nodes."""

    def __init__(self, values, kokkos_cxx):
        self.values = values
        self.variants = {k: FakeVariantValue(v) for k, v in values.items()}
        self.deps = {n: FakeDependency(n) for n in ("kokkos", "kokkos-kernels", "cmake", "hdf5")}
        self.deps["kokkos"].package.kokkos_cxx = kokkos_cxx

    def satisfies(self, text):
        nodes = parse_spec(text)
        if len(nodes) != 1 or nodes[0]["name"] not in (None, "knmf"):
            raise ValueError(f"FakeSpec.satisfies supports knmf-level constraints only: {text!r}")
        return node_satisfies(self.values, nodes[0]["variants"])

    def __getitem__(self, name):
        return self.deps[name]


class PackageBase:
    def __init__(self, spec):
        self.spec = spec

    def __getitem__(self, name):
        return self.spec[name].package


def define(cmake_var, value):
    if isinstance(value, bool):
        return f"-D{cmake_var}:BOOL={'ON' if value else 'OFF'}"
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    return f"-D{cmake_var}:STRING={value}"


class CMakePackage(PackageBase):
    base_variants = {"build_type", "generator", "ipo"}

    def define(self, cmake_var, value):
        return define(cmake_var, value)

    def define_from_variant(self, cmake_var, variant=None):
        variant = variant or cmake_var.lower()
        if variant not in self.spec.variants:
            raise KeyError(f"define_from_variant: knmf has no variant {variant!r}")
        return define(cmake_var, self.spec.variants[variant].value)


# Spack's CudaPackage.cuda_arch_values (spack-packages, 2026).
CUDA_ARCH_VALUES = (
    "10", "11", "12", "13", "20", "21", "30", "32", "35", "37", "50", "52", "53", "60", "61",
    "62", "70", "72", "75", "80", "86", "87", "89", "90", "90a", "100", "100a", "100f", "101",
    "101a", "101f", "103", "103a", "103f", "110", "110a", "110f", "120", "120a", "120f", "121",
    "121a", "121f")


class CudaPackage(PackageBase):
    cuda_arch_values = CUDA_ARCH_VALUES
    base_variants = {"cuda", "cuda_arch"}


class Executable:
    calls = []

    def __init__(self, path):
        self.path = str(path)

    def __call__(self, *args, **kwargs):
        Executable.calls.append((self.path, args, kwargs, list(working_dir.stack)))


class _WorkingDir:
    stack = []

    @contextlib.contextmanager
    def __call__(self, path, create=False):
        self.stack.append(str(path))
        try:
            yield
        finally:
            self.stack.pop()


working_dir = _WorkingDir()


def install_stubs():
    package = types.ModuleType("spack.package")
    for kind in ("version", "variant", "depends_on", "conflicts", "requires", "patch",
                 "maintainers", "license", "provides", "resource", "extends", "redistribute"):
        setattr(package, kind, _directive(kind))
    package.when = when
    package.PackageBase = PackageBase
    package.Executable = Executable
    package.working_dir = working_dir
    package.join_path = os.path.join
    package.which = lambda *names, **kw: Executable(names[0])
    package.run_after = package.run_before = lambda *a, **k: (lambda f: f)
    package.on_package_attributes = lambda **k: (lambda f: f)
    package.InstallError = type("InstallError", (Exception,), {})
    package.tty = types.SimpleNamespace(msg=print, warn=print, info=print, debug=print)
    spack = types.ModuleType("spack")
    spack.package = package

    cmake = types.ModuleType("spack_repo.builtin.build_systems.cmake")
    cmake.CMakePackage = CMakePackage
    cuda = types.ModuleType("spack_repo.builtin.build_systems.cuda")
    cuda.CudaPackage = CudaPackage
    names = {"spack": spack, "spack.package": package, "spack_repo": types.ModuleType("spack_repo"),
             "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
             "spack_repo.builtin.build_systems":
                 types.ModuleType("spack_repo.builtin.build_systems"),
             "spack_repo.builtin.build_systems.cmake": cmake,
             "spack_repo.builtin.build_systems.cuda": cuda}
    sys.modules.update(names)


def load_recipe():
    install_stubs()
    recorded.clear()
    spec = importlib.util.spec_from_file_location("knmf_recipe", RECIPE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------
# Evaluating the recorded directives for one configuration of knmf
# ---------------------------------------------------------------------------------------------
def knmf_values(openmp=True, cuda=False, cuda_arch="none", mpi=False, python=False):
    return {"openmp": openmp, "cuda": cuda, "cuda_arch": cuda_arch if cuda else "none",
            "mpi": mpi, "python": python}


def when_holds(d, values):
    if d.when is None:
        return True
    nodes = parse_spec(d.when)
    if len(nodes) != 1 or nodes[0]["name"] not in (None, "knmf"):
        raise ValueError(f"unsupported when= condition {d.when!r}")
    return node_satisfies(values, nodes[0]["variants"])


def active_deps(values):
    """name -> list of (spec node, type) of the depends_on directives that apply."""
    out = {}
    for d in recorded:
        if d.kind == "depends_on" and when_holds(d, values):
            node = parse_spec(d.args[0])[0]
            dtype = d.kwargs.get("type", ("build", "link"))
            dtype = (dtype,) if isinstance(dtype, str) else tuple(dtype)
            out.setdefault(node["name"], []).append((node, dtype))
    return out


def merged_variants(deps, name):
    """The variant constraints all active depends_on put on one dependency; None on a clash."""
    merged = {}
    for node, _ in deps.get(name, []):
        for k, v in node["variants"].items():
            if k in merged and merged[k] != v:
                return None
            merged[k] = v
    return merged


def conflicted(values):
    for d in recorded:
        if d.kind == "conflicts":
            target = parse_spec(d.args[0])[0]
            if node_satisfies(values, target["variants"]) and when_holds(d, values):
                return d
    return None


# ---------------------------------------------------------------------------------------------
# What the CMake project needs
# ---------------------------------------------------------------------------------------------
# find_package name -> Spack package (a virtual where Spack has one).
CMAKE_TO_SPACK = {
    "Kokkos": "kokkos", "KokkosKernels": "kokkos-kernels", "HDF5": "hdf5", "ZLIB": "zlib-api",
    "yaml-cpp": "yaml-cpp", "MPI": "mpi", "CLI11": "cli11", "GTest": "googletest",
    "nlohmann_json": "nlohmann-json", "benchmark": "benchmark", "BLAS": "blas",
    "LAPACK": "lapack", "Cairo": "cairo", "OpenMP": None, "Threads": None, "Python3": "python",
    "Python": "python", "pybind11": "py-pybind11",
}


def cmake_files():
    skip_top = re.compile(r"^(build|_build|\.git|spack)")
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        if rel != "." and skip_top.match(rel.split(os.sep)[0]):
            dirnames[:] = []
            continue
        for f in filenames:
            if f == "CMakeLists.txt" or f.endswith(".cmake"):
                yield os.path.relpath(os.path.join(dirpath, f), ROOT)


def find_packages():
    """(package, relative file) for every find_package() of the project itself."""
    out = []
    for rel in cmake_files():
        # The consumer project plays a user of an installed knmf; perf/ is off in the recipe.
        if rel.startswith(os.path.join("tests", "consumer", "project")) or rel.startswith("perf"):
            continue
        text = re.sub(r"#[^\n]*", "", open(os.path.join(ROOT, rel)).read())
        for name in re.findall(r"find_package\(\s*([A-Za-z0-9_.+-]+)", text):
            out.append((name, rel))
    return out


def main():
    check(os.path.isfile(RECIPE), f"recipe missing: {RECIPE}")
    source = open(RECIPE).read()
    for line in ("from spack_repo.builtin.build_systems.cmake import CMakePackage",
                 "from spack_repo.builtin.build_systems.cuda import CudaPackage",
                 "from spack.package import *"):
        check(line in source.splitlines(), f"recipe lacks the import line: {line}")

    # repo.yaml (v2 layout: spack_repo/<namespace>/repo.yaml next to packages/)
    repo_dir = os.path.join(ROOT, "spack", "spack_repo", "knmf")
    repo_yaml = yaml.safe_load(open(os.path.join(repo_dir, "repo.yaml")))["repo"]
    check(repo_yaml.get("namespace") == "knmf", f"repo.yaml namespace: {repo_yaml}")
    check(re.fullmatch(r"v2\.\d+", str(repo_yaml.get("api", ""))) is not None,
          f"repo.yaml api must be v2.x: {repo_yaml}")

    os.environ.pop("KNMF_GIT", None)
    mod = load_recipe()
    cls = getattr(mod, "Knmf", None)
    if not check(cls is not None, "package.py defines no class Knmf"):
        return
    check(issubclass(cls, CMakePackage), "Knmf must derive from CMakePackage")
    check(issubclass(cls, CudaPackage), "Knmf must derive from CudaPackage")
    check(cls.git == "file://" + ROOT, f"git points at {cls.git!r}, not this checkout {ROOT!r}")

    versions = [d for d in recorded if d.kind == "version"]
    check(any(d.args[0] == "main" and d.kwargs.get("branch") == "main" for d in versions),
          f"no version('main', branch='main'): {versions}")

    variants = {d.args[0]: d for d in recorded if d.kind == "variant"}
    all_variants = set(variants) | CMakePackage.base_variants | CudaPackage.base_variants
    for v in ("openmp", "cuda", "mpi"):
        check(v in all_variants, f"variant {v} missing")
    if "openmp" in variants:
        check(variants["openmp"].kwargs.get("default") is True, "+openmp must be the default")
    if "mpi" in variants:
        check(variants["mpi"].kwargs.get("default") is False, "~mpi must be the default")

    # cmake: at least what the project's cmake_minimum_required asks for
    top = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    cmake_min = re.search(r"cmake_minimum_required\(VERSION\s+([0-9.]+)", top).group(1)
    base = active_deps(knmf_values())
    cmake_deps = base.get("cmake", [])
    ok = False
    for node, dtype in cmake_deps:
        lo = (node["version"] or "").split(":")[0]
        ok |= dtype == ("build",) and lo and \
            tuple(map(int, lo.split("."))) >= tuple(map(int, cmake_min.split(".")))
    check(ok, f"need depends_on('cmake@{cmake_min}:', type='build'), have {cmake_deps}")

    # Kokkos and Kokkos Kernels in the same version window
    kv = {n: [node["version"] for node, _ in base.get(n, []) if node["version"]]
          for n in ("kokkos", "kokkos-kernels")}
    check(kv["kokkos"] and kv["kokkos"] == kv["kokkos-kernels"],
          f"kokkos and kokkos-kernels need the same version window: {kv}")
    # ... which holds the release CI builds (cmake/bootstrap.sh) and starts no lower than the
    # oldest release knmf compiles against (include/knmf/core/compat.hpp refuses older ones).
    boot = re.search(r"^kokkos_version=([0-9.]+)$", open(os.path.join(ROOT, "cmake", "bootstrap.sh")).read(),
                     re.M).group(1)
    compat = open(os.path.join(ROOT, "include", "knmf", "core", "compat.hpp")).read()
    floor = int(re.search(r"#if KOKKOS_VERSION < (\d+)", compat).group(1))
    floor_kk = int(re.search(r"KOKKOSKERNELS_VERSION < (\d+)", compat).group(1))

    def vtuple(v):  # "4.6.01" -> (4, 6, 1); "4.7" -> (4, 7)
        return tuple(int(x) for x in v.split("."))

    def in_window(v, window):  # Spack's closed ranges: "4.5:4.7" holds 4.5.x ... 4.7.x
        lo, _, hi = window.partition(":")
        t = vtuple(v)
        return (not lo or t[:len(vtuple(lo))] >= vtuple(lo)) and (not hi or t[:len(vtuple(hi))] <= vtuple(hi))

    for w in kv["kokkos"]:
        check(in_window(boot, w), f"the recipe's Kokkos window {w} lacks {boot}, what cmake/bootstrap.sh builds")
        lo = vtuple(w.partition(":")[0] or "0")
        lo_num = lo[0] * 10000 + (lo[1] if len(lo) > 1 else 0) * 100 + (lo[2] if len(lo) > 2 else 0)
        check(lo_num >= floor and lo_num >= floor_kk,
              f"the recipe's Kokkos window {w} starts below what compat.hpp accepts ({floor})")

    # CPU configuration: no CUDA, OpenMP forwarded, host BLAS for KokkosBlas
    for openmp in (True, False):
        deps = active_deps(knmf_values(openmp=openmp))
        kk = merged_variants(deps, "kokkos")
        kkk = merged_variants(deps, "kokkos-kernels")
        check(kk is not None and kkk is not None, f"clashing constraints for ~cuda openmp={openmp}")
        if kk is None or kkk is None:
            continue
        check(kk.get("cuda") is False, f"~cuda must ask for kokkos~cuda: {kk}")
        check(kkk.get("blas") is True, f"~cuda must ask for kokkos-kernels+blas: {kkk}")
        check(kk.get("openmp", False) == openmp, f"openmp={openmp} not forwarded to kokkos: {kk}")
        check(conflicted(knmf_values(openmp=openmp)) is None, "a CPU build hits a conflict")

    # CUDA: every cuda_arch forwarded to kokkos and kokkos-kernels, and only that one
    for arch in CudaPackage.cuda_arch_values:
        values = knmf_values(cuda=True, cuda_arch=arch)
        deps = active_deps(values)
        kk = merged_variants(deps, "kokkos")
        kkk = merged_variants(deps, "kokkos-kernels")
        if not check(kk is not None and kkk is not None,
                     f"cuda_arch={arch}: clashing kokkos constraints (another arch leaks in?)"):
            continue
        want_k = {"cuda": True, "cuda_lambda": True, "wrapper": True, "cuda_arch": arch}
        want_kk = {"cuda": True, "cublas": True, "cusparse": True, "cuda_arch": arch}
        check(node_satisfies(kk, want_k), f"cuda_arch={arch}: kokkos gets {kk}, need {want_k}")
        check(node_satisfies(kkk, want_kk),
              f"cuda_arch={arch}: kokkos-kernels gets {kkk}, need {want_kk}")
        check(conflicted(values) is None, f"cuda_arch={arch} hits a conflict")
    check(conflicted(knmf_values(cuda=True, cuda_arch="none")) is not None,
          "missing conflicts('+cuda', when='cuda_arch=none')")

    # MPI
    on, off = active_deps(knmf_values(mpi=True)), active_deps(knmf_values(mpi=False))
    check("mpi" in on, "+mpi must depend on mpi")
    check("mpi" not in off, "~mpi must not depend on mpi")
    check((merged_variants(on, "hdf5") or {}).get("mpi") is True, "+mpi needs hdf5+mpi")
    check((merged_variants(off, "hdf5") or {}).get("mpi") is False, "~mpi needs hdf5~mpi")

    # test-only dependencies
    for name in ("googletest",):
        types_ = {t for _, t in base.get(name, [])}
        check(types_ == {("test",)}, f"{name} must be a test-only dependency, has {types_}")

    # every find_package of the project is a dependency; outside tests/ not test-only
    all_deps = {}
    for values in (knmf_values(), knmf_values(mpi=True), knmf_values(cuda=True, cuda_arch="80"),
                   knmf_values(python=True)):
        for n, lst in active_deps(values).items():
            all_deps.setdefault(n, set()).update(t for _, t in lst)
    for name, rel in find_packages():
        if not check(name in CMAKE_TO_SPACK,
                     f"{rel}: find_package({name}) has no Spack name in CMAKE_TO_SPACK of "
                     f"{os.path.relpath(__file__, ROOT)}; add it there and to the recipe"):
            continue
        pkg = CMAKE_TO_SPACK[name]
        if pkg is None or pkg in ("blas", "lapack"):
            continue
        in_tests = rel.startswith("tests" + os.sep)
        if check(pkg in all_deps, f"{rel}: find_package({name}) but the recipe has no "
                                  f"depends_on('{pkg}')"):
            if not in_tests:
                check(any(t != ("test",) for t in all_deps[pkg]),
                      f"{rel}: {pkg} is needed outside tests/ but is a test-only dependency")

    # cmake_args on fake specs
    options = set(re.findall(r"option\(\s*(KNMF_[A-Z_]+)", top))
    for mpi in (True, False):
        for run_tests in (True, False):
            spec = FakeSpec(knmf_values(mpi=mpi), kokkos_cxx="/opt/fake/nvcc_wrapper")
            pkg = cls(spec)
            pkg.run_tests = run_tests
            args = pkg.cmake_args()
            onoff = lambda b: "ON" if b else "OFF"  # noqa: E731
            for want in (f"-DKNMF_ENABLE_MPI:BOOL={onoff(mpi)}",
                         f"-DKNMF_ENABLE_TESTS:BOOL={onoff(run_tests)}",
                         "-DKNMF_ENABLE_PERF:BOOL=OFF",
                         "-DCMAKE_CXX_COMPILER:STRING=/opt/fake/nvcc_wrapper"):
                check(want in args, f"cmake_args (mpi={mpi}, tests={run_tests}) lacks {want}: {args}")
            for a in args:
                m = re.match(r"-D(KNMF_[A-Z_]+):", a)
                if m:
                    check(m.group(1) in options, f"cmake_args sets {m.group(1)}, which "
                                                 f"CMakeLists.txt does not define as an option()")

    # check(): ctest in the build directory
    spec = FakeSpec(knmf_values(), kokkos_cxx="c++")
    pkg = cls(spec)
    pkg.build_directory = "/tmp/fake-build"
    Executable.calls.clear()
    if check(hasattr(cls, "check") or hasattr(cls, "test"), "no check()/test() method"):
        getattr(pkg, "check", None) and pkg.check()
        ran = [c for c in Executable.calls if os.path.basename(c[0]) == "ctest"]
        check(ran and ran[0][3][-1:] == ["/tmp/fake-build"] and "--output-on-failure" in ran[0][1],
              f"check() must run ctest --output-on-failure in the build directory: {Executable.calls}")

    check_environment()


def check_environment():
    env = yaml.safe_load(open(os.path.join(ROOT, "spack.yaml")))["spack"]
    repos = env.get("repos")
    paths = list(repos.values()) if isinstance(repos, dict) else list(repos or [])
    repo_ok = False
    for p in paths:
        d = os.path.normpath(os.path.join(ROOT, p))
        ry = os.path.join(d, "repo.yaml")
        repo_ok |= os.path.isfile(ry) and yaml.safe_load(open(ry))["repo"]["namespace"] == "knmf" \
            and os.path.isfile(os.path.join(d, "packages", "knmf", "package.py"))
    check(repo_ok, f"spack.yaml repos {repos} do not reach the knmf repository")

    dev = (env.get("develop") or {}).get("knmf")
    if dev is not None:
        d = os.path.normpath(os.path.join(ROOT, dev.get("path", ".")))
        check(os.path.isfile(os.path.join(d, "CMakeLists.txt")) and
              "project(knmf" in open(os.path.join(d, "CMakeLists.txt")).read(),
              f"develop path {dev} is not the knmf source tree")

    specs = [parse_spec(s) for s in env.get("specs", [])]
    cpu, gpu = [], {}
    for nodes in specs:
        root = nodes[0]
        check(root["name"] == "knmf", f"spack.yaml spec root is not knmf: {root}")
        dep = {n["name"]: n["variants"] for n in nodes[1:]}
        values = knmf_values()
        for k in values:
            if k in root["variants"]:
                values[k] = root["variants"][k]
        if values["cuda"] is False:
            values["cuda_arch"] = "none"
        check(conflicted(values) is None, f"spack.yaml spec {root} hits a recipe conflict")
        recipe = active_deps(values)
        # the environment's ^constraints must agree with what the recipe asks for
        for name, want in dep.items():
            have = merged_variants(recipe, name)
            check(have is not None, f"recipe has clashing constraints on {name} for {root}")
            for k, v in want.items():
                if have is not None and k in have:
                    check(have[k] == v, f"spack.yaml asks {name} {k}={v}, recipe asks {have[k]}")
        if values["cuda"]:
            arch = values["cuda_arch"]
            k = dep.get("kokkos", {})
            check(k.get("cuda") is True and k.get("wrapper") is True and k.get("cuda_arch") == arch,
                  f"CUDA spec for cuda_arch={arch} needs ^kokkos+cuda+wrapper cuda_arch={arch}: {k}")
            kk = dep.get("kokkos-kernels", {})
            check(kk.get("cublas") is True and kk.get("cusparse") is True,
                  f"CUDA spec for cuda_arch={arch} needs ^kokkos-kernels+cublas+cusparse: {kk}")
            gpu[arch] = nodes
        else:
            check(dep.get("kokkos", {}).get("openmp") is True and values["openmp"],
                  f"the CPU spec needs +openmp ^kokkos+openmp: {nodes}")
            cpu.append(nodes)
    check(len(cpu) == 1, f"spack.yaml needs one CPU spec, has {len(cpu)}")
    check(set(gpu) == {"80", "90"}, f"spack.yaml needs CUDA specs for cuda_arch 80 and 90: {set(gpu)}")
    unify = (env.get("concretizer") or {}).get("unify", True)
    check(unify is not True, "three Kokkos configurations cannot be unified: concretizer:unify "
                             "must be false or when_possible")
    check(env.get("view") in (False, None) or isinstance(env.get("view"), dict),
          "a single view cannot hold three knmf installs")


if __name__ == "__main__":
    main()
    for f in failures:
        print("FAIL:", f)
    print(f"check_spack_recipe: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
