package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagHelpReadsWell checks every flag of every command: pflag takes the first backquoted word of a
// usage string as the value's name, so `--detach` read "--detach rayctl down" in the help.
func TestFlagHelpReadsWell(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("rayctl %s --%s: its usage has a backquote, which pflag makes the value's name: %q", c.Name(), f.Name, f.Usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}
