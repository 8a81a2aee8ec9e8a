# Read by cpack (CPACK_PROJECT_CONFIG_FILE). The binary's default
# configuration path is fixed when the tree is configured; only a tree with
# the prefix /usr makes a package whose orcd reads /etc/orcd/orcd.conf.
if(CPACK_GENERATOR STREQUAL "DEB" AND NOT CPACK_ORCD_CONFIGURED_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "orcd: the .deb needs a build tree configured with "
    "-DCMAKE_INSTALL_PREFIX=/usr (this one has ${CPACK_ORCD_CONFIGURED_PREFIX}); see README.md")
endif()
