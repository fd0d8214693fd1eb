package host

import (
	"fmt"
	"strconv"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func quote(s string) string { return strconv.Quote(s) }
