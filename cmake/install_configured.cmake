# SPDX-License-Identifier: MIT
# install_configured.cmake: run by `cmake --install` (never at configure time). Fills in the
# installed paths of the units, tmpfiles.d and pkg-config files from the prefix given to the
# install, so
# that `cmake --install build --prefix /opt/rocmmem` gives units that start /opt/rocmmem's
# daemon. DESTDIR is never part of a path written into a file.
#
# rocmmem_install_configured(TEMPLATE DESTINATION NAME): install TEMPLATE (a path relative to
# ROCMMEM_SOURCE_DIR) as DESTINATION/NAME (DESTINATION relative to the install prefix, or
# absolute) with @ROCMMEMD@, @ROCMMEM_EXPORTER@, @ROCMMEMD_CONF_EXAMPLE@, @ROCMMEM_VERSION@ and
# rocmmem.pc's @ROCMMEM_PREFIX@, @ROCMMEM_PC_LIBDIR@, @ROCMMEM_PC_INCLUDEDIR@ and
# @LIBROCMMEM_VERSION@ (the library's version, not the project's) replaced.
function(rocmmem_install_configured template destination name)
  foreach(dir SBINDIR BINDIR DATADIR)
    if(IS_ABSOLUTE "${ROCMMEM_INSTALL_${dir}}")
      set(full_${dir} "${ROCMMEM_INSTALL_${dir}}")
    else()
      set(full_${dir} "${CMAKE_INSTALL_PREFIX}/${ROCMMEM_INSTALL_${dir}}")
    endif()
  endforeach()
  # rocmmem.pc: paths under the prefix written as ${prefix}/..., so that pkg-config can tell
  # the system's directories (and leave out -I/usr/include, -L/usr/lib/...).
  set(ROCMMEM_PREFIX "${CMAKE_INSTALL_PREFIX}")
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${ROCMMEM_INSTALL_${dir}}")
      set(ROCMMEM_PC_${dir} "${ROCMMEM_INSTALL_${dir}}")
    else()
      set(ROCMMEM_PC_${dir} "\${prefix}/${ROCMMEM_INSTALL_${dir}}")
    endif()
  endforeach()
  set(ROCMMEMD "${full_SBINDIR}/rocmmemd")
  set(ROCMMEM_EXPORTER "${full_BINDIR}/rocmmem-exporter")
  set(ROCMMEMD_CONF_EXAMPLE "${full_DATADIR}/rocmmemd/rocmmemd.conf")
  if(NOT IS_ABSOLUTE "${destination}")
    set(destination "${CMAKE_INSTALL_PREFIX}/${destination}")
  endif()
  string(REGEX REPLACE "\\.in$" "" staged "${ROCMMEM_INSTALL_STAGING}/${template}")
  configure_file("${ROCMMEM_SOURCE_DIR}/${template}" "${staged}" @ONLY)
  # file(INSTALL) adds DESTDIR, prints the usual line and records the file in the manifest.
  file(INSTALL DESTINATION "${destination}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE
       GROUP_READ WORLD_READ FILES "${staged}" RENAME "${name}")
endfunction()
