package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/controlplane"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/procstop"
	"github.com/rayctl/rayctl/pkg/userns"
)

func newDownCommand(g *globalFlags) *cobra.Command {
	var timeout time.Duration
	var purge, deleteData bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a rayctl started with `rayctl up --detach`; --purge also removes every container and pod network",
		Long: `Stop the rayctl running on the data dir. Pods' containers keep running across a stop (the next
'rayctl up' re-adopts them, as a restarted kubelet would); --purge removes them, their sandboxes, network
namespaces, IPs and the pod bridge. Stored objects stay unless --delete-data removes the whole data dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if purge || deleteData {
				// An ordinary user's pods left files of the ids its user namespace maps, and a containerd
				// that only runs there: purge from inside one, as `rayctl up` runs.
				if sb, err := controlplane.DecideSandbox(controlplane.PodNetworkAuto); err == nil && sb.Reexec {
					controlplane.EndRootless(g.dataDir) // what a rayctl killed with its launcher left
					code, err := userns.Reexec(os.Args[1:], nil)
					if err != nil {
						return err
					}
					os.Exit(code)
				}
				if userns.Inside() {
					if err := userns.PrivateMounts(); err != nil {
						return err
					}
				}
			}
			if err := down(cmd.OutOrStdout(), g.dataDir, timeout); err != nil {
				return err
			}
			dir, err := datadir.Open(g.dataDir)
			if err != nil {
				return err
			}
			if purge || deleteData {
				summary, err := controlplane.Purge(cmd.Context(), dir)
				if err != nil {
					return fmt.Errorf("purging the runtime: %w", err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), summary)
			}
			if deleteData {
				if err := os.RemoveAll(dir.Path); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", dir.Path)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for a clean stop before killing")
	cmd.Flags().BoolVar(&purge, "purge", false, "also remove every container, pod sandbox, network namespace, pod IP and the pod bridge")
	cmd.Flags().BoolVar(&deleteData, "delete-data", false, "purge, then delete the whole data dir (every stored object)")
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
	killed, err := procstop.PIDs([]int{st.PID}, syscall.SIGTERM, timeout, nil)
	switch {
	case err != nil:
		return err
	case len(killed) > 0:
		fmt.Fprintf(out, "rayctl (pid %d) did not stop within %s and was killed\n", st.PID, timeout)
	default:
		fmt.Fprintf(out, "stopped rayctl (pid %d)\n", st.PID)
	}
	return nil
}
