# Debian package: `cpack -G DEB` in a build directory makes
# rlock_VERSION_ARCH.deb with
#   /usr/bin/rlock
#   /usr/share/man/man1/rlock.1.gz
#   /usr/share/bash-completion/completions/rlock
#   /usr/share/zsh/vendor-completions/_rlock
#   /usr/share/fish/vendor_completions.d/rlock.fish
# The files are the ones the top-level CMakeLists.txt installs; this file only
# describes the package. Included (OPTIONAL) at the end of CMakeLists.txt.

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed lock on Redis for shell scripts, cron jobs and CI")
# Overridable at configure time: -DRLOCK_PACKAGE_MAINTAINER="Name <mail>".
set(RLOCK_PACKAGE_MAINTAINER "rlock maintainers <rlock@localhost>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_PACKAGE_CONTACT "${RLOCK_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RLOCK_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# The package ships the binary, not its debug information.
set(CPACK_STRIP_FILES TRUE)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends is computed by dpkg-shlibdeps (package dpkg-dev) from the libraries
# the binary links: libhiredis and libc (libstdc++ is linked in statically
# and fmt is compiled in: see RLOCK_STATIC_RUNTIME). OpenSSL is loaded
# with dlopen() for TLS (libssl.so.3, which pulls in libcrypto.so.3), so
# shlibdeps cannot see it: libssl3 is named here, and Debian's security
# updates of OpenSSL keep reaching rlock.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The package that ships libssl.so.3 here (libssl3 on Debian 12, libssl3t64
# on 13), found as dpkg-shlibdeps would; libssl3 when dpkg does not know it.
set(RLOCK_LIBSSL_PACKAGE libssl3)
get_filename_component(rlock_openssl_dir "${OPENSSL_SSL_LIBRARY}" DIRECTORY)
execute_process(COMMAND dpkg-query -S "${rlock_openssl_dir}/libssl.so.3"
  OUTPUT_VARIABLE rlock_owner ERROR_QUIET RESULT_VARIABLE rlock_owner_rc)
if(rlock_owner_rc EQUAL 0 AND rlock_owner MATCHES "^([^:,]+)")
  set(RLOCK_LIBSSL_PACKAGE ${CMAKE_MATCH_1})
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${RLOCK_LIBSSL_PACKAGE}")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "redis-server")
# The long description; CPack puts the summary line first and indents the
# rest as deb-control(5) wants.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "rlock is flock(1) for many machines: `rlock run NAME -- COMMAND` runs the
command while holding a lock named NAME on a Redis server, so that a cron
job, a deployment or a CI job runs on one host at a time. Locks are leases
renewed while the command runs; the command is terminated before its lease
could expire. Waiters are served first come, first served. Also semaphores
(--limit N), shared locks, fencing tokens, and status and forced release
for operators.")

# Debian compresses manual pages. CMakeLists.txt installs man/rlock.1 as it is
# (right for `cmake --install`); in the package's staging tree it is gzipped
# just before the .deb is made. -n: no name or time stamp, so the package is
# reproducible.
set(RLOCK_GZIP_MAN_SCRIPT ${CMAKE_BINARY_DIR}/packaging/gzip-man.cmake)
file(WRITE ${RLOCK_GZIP_MAN_SCRIPT} [=[
file(GLOB_RECURSE pages "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*/share/man/man1/*.1")
foreach(page IN LISTS pages)
  execute_process(COMMAND gzip -9nf "${page}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${page} failed")
  endif()
endforeach()
]=])
set(CPACK_PRE_BUILD_SCRIPTS ${RLOCK_GZIP_MAN_SCRIPT})

include(CPack)
