package rewrite

import "io"

var ioEOF = io.EOF
