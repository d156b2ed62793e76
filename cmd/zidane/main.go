// Command zidane is the headless client: it sends one prompt and prints the answer.
//
//	ZIDANE_URL=ws://127.0.0.1:4380 ZIDANE_TOKEN=zds_… zidane -c "Say hello." [--json] [--session ID]
//	zidane -c "Say hello."    # a local server: URL and token from <data-dir>/daemon.json
//	zidane version
//
// Without --json it prints the assistant's text of its run; with --json it prints each sequenced
// signal of its run (those with $seq; not the ephemeral stream:progress) as one JSON object per
// line (JSON Lines, no HTML escaping). It answers the run's approvals and questions at the
// terminal, from JSON lines on stdin, or as --approve says (answerHelp). It survives a dropped
// connection (the client reconnects and resumes the session). Ctrl-C cancels the run on the
// server, waits for its run:end and exits 130; a second Ctrl-C exits at once. Exit codes: 0 the
// run ended ok, 1 it failed or the server could not be used, 2 bad usage or no server found,
// 130 interrupted.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/zidane-server/zidane/client"
	"github.com/zidane-server/zidane/protocol"
)

// Version is the CLI's version: protocol.ProductVersion, from the VERSION file (make release writes it).
var Version = protocol.ProductVersion

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitError carries an exit code out of a cobra command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func run(args []string, stdout, stderr io.Writer) int {
	root := rootCmd(stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(stderr, "zidane:", err)
		return exitUsage
	}
}

const envHelp = `Where it connects:
  ZIDANE_URL     the server's WebSocket URL (ws://host:port, wss://…, or unix:///path/to/socket)
  ZIDANE_TOKEN   a chat token (zds_…); mint one on the server's machine with
                 zidane-server token create --name cli --scope chat
  Without ZIDANE_URL, zidane reads the discovery file daemon.json that a running local server
  writes in its data dir (--data-dir; default $ZIDANE_SERVER_HOME, /var/lib/zidane-server as
  root, else $XDG_DATA_HOME/zidane-server or ~/.local/share/zidane-server): it names the URL and
  a local chat token.

Output: the assistant's text of this prompt's run only; --json prints each signal of the run as
one JSON object per line (those with a $seq: not the passing stream:progress). A dropped connection is resumed without losing or repeating anything.
Ctrl-C cancels the run on the server (chat.cancel), waits for it to end and exits 130; a second
Ctrl-C exits at once.

` + answerHelp + `

Exit codes: 0 ok, 1 the run failed or the server could not be used, 2 bad usage or no server
found, 130 interrupted.`

// promptOptions are the root command's flags.
type promptOptions struct {
	prompt     string
	asJSON     bool
	sessionID  string
	timeout    time.Duration
	cancelWait time.Duration
	dataDir    string
	model      string
	approve    string
}

func rootCmd(stdout, stderr io.Writer) *cobra.Command {
	var o promptOptions
	root := &cobra.Command{
		Use:           "zidane -c PROMPT [--json] [--session ID]",
		Short:         "Send one prompt to a zidane-server and print the answer",
		Long:          "Send one prompt to a zidane-server and print the answer.\n\n" + envHelp,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.prompt == "" {
				fmt.Fprintln(stderr, "zidane: -c \"prompt\" is required (zidane --help)")
				return exitError{exitUsage}
			}
			if !validApprove(o.approve) {
				fmt.Fprintf(stderr, "zidane: --approve %q: use ask (the default), allow or never (zidane --help)\n", o.approve)
				return exitError{exitUsage}
			}
			return exitError{runPrompt(o, stdout, stderr)}
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	f := root.Flags()
	f.StringVarP(&o.prompt, "prompt", "c", "", "the prompt to send")
	f.BoolVar(&o.asJSON, "json", false, "print each signal of the run (with its $seq) as one JSON object per line")
	f.StringVar(&o.sessionID, "session", "", "send to this session instead of creating one")
	f.StringVar(&o.approve, "approve", approveAsk, "answer approvals and questions: ask (at the terminal, or JSON lines on stdin), allow (each approval once; questions dismissed) or never (deny; dismiss)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	f.DurationVar(&o.cancelWait, "cancel-wait", 10*time.Second, "after Ctrl-C, how long to wait for the cancelled run to end")
	// --data-dir is every command's (zidane models too).
	root.PersistentFlags().StringVar(&o.dataDir, "data-dir", client.DefaultDataDir(), "where a local server's daemon.json is, used when ZIDANE_URL is not set")
	f.StringVar(&o.model, "model", "", "the model for this prompt and the session's next ones, provider/model (zidane models lists them)")
	root.AddCommand(versionCmd(stdout), modelsCmd(&o, stdout, stderr))
	return root
}

// modelsCmd lists the server's models (models.list), the default marked with *.
func modelsCmd(o *promptOptions, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "models",
		Short: "List the models the server offers (provider/model), the default marked with *",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return exitError{listModels(*o, stdout, stderr)}
		},
	}
}

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the CLI's and the protocol's versions",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintf(stdout, "zidane %s (protocol %d, min %d, schema %s)\n", Version, protocol.ProtocolVersion, protocol.MinProtocolVersion, protocol.SchemaHash[:12])
		},
	}
}
