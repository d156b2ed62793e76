package main

import (
	"fmt"
	"io"
)

func runClient(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "zidane-conformance client: not built yet")
	return 2
}
