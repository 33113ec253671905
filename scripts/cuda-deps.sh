# Sourced by the GPU check scripts. With DEPS_DIR set, unpacks the Debian
# packages (.deb) it holds - the libraries a bare GPU machine lacks - into
# /tmp/ssm-deps and points pkg-config, CMake, the compiler and the loader at
# them.
if [ -n "${DEPS_DIR:-}" ]; then
  root=/tmp/ssm-deps
  mkdir -p $root
  for f in "$DEPS_DIR"/*.deb; do dpkg -x "$f" $root; done
  # The packages' pkg-config files name /usr: point them at the unpacked copy.
  find $root -name '*.pc' -exec sed -i "s|=/usr|=$root/usr|g" {} +
  lib=$root/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CMAKE_PREFIX_PATH=$root/usr
  export CPATH=$root/usr/include
fi
