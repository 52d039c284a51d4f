# Optional dependencies. Modules whose sources need them add themselves here:
#   ZEUS_EXCLUDED_SOURCES  sources left out when a dependency is missing
#   ZEUS_OPTIONAL_LIBS     libraries linked into libzeus
set(ZEUS_EXCLUDED_SOURCES "")
set(ZEUS_OPTIONAL_LIBS "")

# libmicrohttpd: the Perseus server (src/pfo/server.c). Required.
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd)
list(APPEND ZEUS_OPTIONAL_LIBS PkgConfig::MICROHTTPD)
