// Command zidane-conformance runs the protocol conformance kit (e2e/wirekit) against a server:
//
//	zidane-conformance --url ws://127.0.0.1:4380/ --token zds_… [--run REGEX] [--json] [--dir DIR]
//	zidane-conformance client --cmd "<client under test>" [--json]
//
// It prints one line per scenario (PASS/FAIL/SKIP name: reason naming the step and the frame
// that differed; with --json one JSON object per line) and exits 1 when any scenario fails, 2 on
// bad usage.
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
	"github.com/zidane-server/zidane/protocol"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "client" {
		return runClient(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("zidane-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "the server's WebSocket address, e.g. ws://127.0.0.1:4380/")
	token := fs.String("token", "", "a chat-scoped bearer token of that server")
	runRE := fs.String("run", "", "run only scenarios whose name matches this regular expression")
	asJSON := fs.Bool("json", false, "print one JSON object per scenario instead of a line")
	dir := fs.String("dir", "", "also run the *.jsonl scenarios in this folder")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for each frame")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zidane-conformance --url ws://HOST:PORT/ --token TOKEN [flags]   (server mode: check a server)")
		fmt.Fprintln(stderr, "       zidane-conformance client --cmd \"COMMAND\" [flags]             (client mode: check a client; client -h lists its flags)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *url == "" || *token == "" {
		fmt.Fprintln(stderr, "zidane-conformance: --url and --token are required (client mode: zidane-conformance client --cmd \"<command>\")")
		return 2
	}
	var filter *regexp.Regexp
	if *runRE != "" {
		re, err := regexp.Compile(*runRE)
		if err != nil {
			fmt.Fprintf(stderr, "zidane-conformance: --run: %v\n", err)
			return 2
		}
		filter = re
	}
	scs, err := wirekit.ServerScenarios()
	if err == nil && *dir != "" {
		var more []*wirekit.Scenario
		more, err = wirekit.Load(os.DirFS(*dir), ".")
		scs = append(scs, more...)
	}
	if err != nil {
		fmt.Fprintf(stderr, "zidane-conformance: %v\n", err)
		return 2
	}
	r := &wirekit.Runner{URL: *url, Token: *token, Timeout: *timeout}
	return report(r.Run(context.Background(), scs, filter), *asJSON, stdout)
}

// report prints results and returns the exit code: 1 when any failed.
func report(rs []wirekit.Result, asJSON bool, stdout io.Writer) int {
	for _, r := range rs {
		if asJSON {
			b, _ := protocol.Marshal(r)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintln(stdout, r.String())
		}
	}
	pass, fail, skip := wirekit.Summary(rs)
	if !asJSON {
		fmt.Fprintf(stdout, "%d passed, %d failed, %d skipped\n", pass, fail, skip)
	}
	if fail > 0 {
		return 1
	}
	return 0
}
