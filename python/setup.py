"""Build step of the msccl package: the Go build of libmsccl.so.

The metadata is here as well (pyproject.toml only names the build
backend) so that the setuptools of any Python >= 3.9 builds it. The
build requirements beyond setuptools and wheel are the Go toolchain (go
on PATH, or $GO) and cgo's C compiler: build_py runs

    go build -buildmode=c-shared -o <build>/msccl/libmsccl.so ./capi

in the msccl-go checkout this directory belongs to (its parent, or
$MSCCL_GO_SOURCE), so the wheel carries the library and nothing is
compiled at import time.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

MODULE = "module github.com/msccl-go/msccl-go"


def source_root():
    root = os.environ.get("MSCCL_GO_SOURCE") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(root, "go.mod")) as f:
            if MODULE in f.read():
                return root
    except OSError:
        pass
    raise SystemExit(
        "msccl: cannot find the msccl-go source (a go.mod with %r) at %s; "
        "build from a checkout (pip install --no-build-isolation ./python) "
        "or set MSCCL_GO_SOURCE to one" % (MODULE, root))


class build_go(build_py):
    """build_py that also builds libmsccl.so into the package."""

    def run(self):
        super().run()
        go = os.environ.get("GO") or shutil.which("go")
        if not go:
            raise SystemExit(
                "msccl: building the package needs the Go toolchain (go on PATH, or $GO) "
                "and a C compiler for cgo; see README.md")
        out = os.path.abspath(os.path.join(self.build_lib, "msccl", "libmsccl.so"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        env = dict(os.environ, CGO_ENABLED="1")
        cmd = [go, "build", "-trimpath", "-buildmode=c-shared", "-o", out, "./capi"]
        self.announce("msccl: " + " ".join(cmd), level=2)
        try:
            subprocess.run(cmd, cwd=source_root(), env=env, check=True)
        except subprocess.CalledProcessError as e:
            raise SystemExit("msccl: the Go build of libmsccl.so failed (exit %d); its output is above" % e.returncode)


class platform_distribution(Distribution):
    # The wheel holds a shared library: tag it for this platform, not
    # py3-none-any.
    def has_ext_modules(self):
        return True


def readme():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")) as f:
        return f.read()


setup(
    name="msccl",
    version="0.1.0",
    description="Compile, prove and run MSCCL++-style collective schedules (Python bindings of msccl-go)",
    long_description=readme(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    license="MIT",
    packages=["msccl"],
    install_requires=[],
    extras_require={"torch": ["torch"]},
    entry_points={"console_scripts": ["msccl = msccl.__main__:main"]},
    cmdclass={"build_py": build_go},
    distclass=platform_distribution,
)
