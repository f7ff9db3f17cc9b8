// Command modelcalls captures the model calls of agent rollouts and attaches them to rollout records.
// All behaviour lives in internal/cli; this file only hands off and turns the result into an exit code.
package main

import (
	"os"

	"github.com/modelcalls/modelcalls/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
