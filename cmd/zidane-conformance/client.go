package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/zidane-server/zidane/e2e/wirekit"
)

// runClient is client mode: `zidane-conformance client --cmd "<command>" [--run REGEX] [--json]
// [--dir DIR]` plays the server side of each client scenario for the command (wirekit.ClientRunner).
func runClient(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zidane-conformance client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	command := fs.String("cmd", "", "the client under test; started as <cmd> --url ws://127.0.0.1:P/ --token T --session S")
	runRE := fs.String("run", "", "run only scenarios whose name matches this regular expression")
	asJSON := fs.Bool("json", false, "print one JSON object per scenario instead of a line")
	dir := fs.String("dir", "", "also run the client *.jsonl scenarios in this folder")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for the client at each step")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *command == "" {
		fmt.Fprintln(stderr, `zidane-conformance client: --cmd "<command>" is required`)
		return 2
	}
	var filter *regexp.Regexp
	if *runRE != "" {
		re, err := regexp.Compile(*runRE)
		if err != nil {
			fmt.Fprintf(stderr, "zidane-conformance client: --run: %v\n", err)
			return 2
		}
		filter = re
	}
	scs, err := wirekit.ClientScenarios()
	if err == nil && *dir != "" {
		var more []*wirekit.ClientScenario
		more, err = wirekit.LoadClient(os.DirFS(*dir), ".")
		scs = append(scs, more...)
	}
	if err != nil {
		fmt.Fprintf(stderr, "zidane-conformance client: %v\n", err)
		return 2
	}
	r := &wirekit.ClientRunner{Command: *command, Timeout: *timeout}
	return report(r.Run(context.Background(), scs, filter), *asJSON, stdout)
}
