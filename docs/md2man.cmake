# docs/<page>.<N>.md → the man page <page>.<N>, with go-md2man.
#   cmake -DMD2MAN=<go-md2man> -DAWK=<awk> -DIN=<docs/page.N.md> -DOUT=<page.N> -P docs/md2man.cmake
# The Markdown's first line must be its title block, `% <PAGE> <N> ...`
# (go-md2man writes it as `.TH <PAGE> <N> ...`: the name upper-cased, the
# section of the file name, then date, source and manual as .TH takes them);
# a page without one would come out with a broken header, so it fails here.
# Tables too wide for 80 columns become definition lists first
# (docs/md-tables.awk): tbl cannot fit them, the page would overflow.
get_filename_component(page "${IN}" NAME)
string(REGEX REPLACE "\\.md$" "" page "${page}")
string(REGEX REPLACE "^(.*)\\.([1-8])$" "\\1" name "${page}")
string(REGEX REPLACE "^(.*)\\.([1-8])$" "\\2" section "${page}")
string(TOUPPER "${name}" title)
file(STRINGS "${IN}" first LIMIT_COUNT 1)
string(FIND "${first} " "% ${title} ${section} " at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "${IN}: the first line must be the man page's title block "
                      "`% ${title} ${section} \"\" \"taskferry\" \"<manual>\"`, not `${first}`")
endif()
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
get_filename_component(here "${CMAKE_SCRIPT_MODE_FILE}" DIRECTORY)
execute_process(COMMAND "${AWK}" -v width=72 -f "${here}/md-tables.awk" "${IN}"
                OUTPUT_FILE "${OUT}.md" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE "${OUT}.md")
  message(FATAL_ERROR "docs/md-tables.awk failed on ${IN} (${rc})")
endif()
execute_process(COMMAND "${MD2MAN}" -in "${OUT}.md" -out "${OUT}.tmp" RESULT_VARIABLE rc)
file(REMOVE "${OUT}.md")
if(NOT rc EQUAL 0)
  file(REMOVE "${OUT}.tmp")
  message(FATAL_ERROR "go-md2man failed on ${IN} (${rc})")
endif()
file(RENAME "${OUT}.tmp" "${OUT}")
