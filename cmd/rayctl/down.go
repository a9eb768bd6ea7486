package main

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/datadir"
)

func newDownCommand(g *globalFlags) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a rayctl started with `rayctl up --detach`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return down(cmd.OutOrStdout(), g.dataDir, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for a clean stop before killing")
	return cmd
}

func down(out io.Writer, dataDir string, timeout time.Duration) error {
	dir, err := datadir.Open(dataDir)
	if err != nil {
		return err
	}
	st, err := dir.ReadState()
	if errors.Is(err, datadir.ErrNotRunning) {
		fmt.Fprintf(out, "rayctl is not running in %s\n", dir.Path)
		return nil
	}
	if err != nil {
		return err
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if syscall.Kill(st.PID, 0) != nil {
			fmt.Fprintf(out, "stopped rayctl (pid %d)\n", st.PID)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(st.PID, syscall.SIGKILL)
	fmt.Fprintf(out, "rayctl (pid %d) did not stop within %s and was killed\n", st.PID, timeout)
	return nil
}
