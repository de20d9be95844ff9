"""Builds the streamstats package; the gRPC stubs are generated from proto/ at build time.

The stubs come from the system `protoc` and `grpc_python_plugin` (Debian: protobuf-compiler,
protobuf-compiler-grpc), whose versions match Debian's python3-protobuf and python3-grpcio.
The .proto is looked for in $STREAMSTATS_PROTO_DIR, then ../proto (a checkout), then ./proto.
Set $PROTOC / $GRPC_PYTHON_PLUGIN to use other tools. Nothing generated is committed.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

PROTO = os.path.join("streamstats", "v1", "streamstats.proto")
HERE = os.path.dirname(os.path.abspath(__file__))


def proto_root():
    candidates = [os.environ.get("STREAMSTATS_PROTO_DIR"),
                  os.path.join(HERE, "..", "proto"), os.path.join(HERE, "proto")]
    for root in candidates:
        if root and os.path.isfile(os.path.join(root, PROTO)):
            return os.path.abspath(root)
    raise SystemExit("streamstats: cannot find %s under $STREAMSTATS_PROTO_DIR, ../proto or ./proto"
                     % PROTO)


def tool(env, name, package):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise SystemExit("streamstats: %s not found (Debian: apt-get install %s), or set $%s"
                         % (name, package, env))
    return path


class BuildPyWithStubs(build_py):
    """build_py, then protoc --python_out --grpc_python_out into the build tree."""

    def run(self):
        super().run()
        root = proto_root()
        protoc = tool("PROTOC", "protoc", "protobuf-compiler")
        plugin = tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin", "protobuf-compiler-grpc")
        out = os.path.abspath(self.build_lib)
        subprocess.check_call([protoc, "-I", root, "--python_out=" + out,
                               "--grpc_python_out=" + out,
                               "--plugin=protoc-gen-grpc_python=" + plugin,
                               os.path.join(root, PROTO)])


setup(cmdclass={"build_py": BuildPyWithStubs})
