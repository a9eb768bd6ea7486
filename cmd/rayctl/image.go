package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/runtime/image"
)

func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Work with the container images rayctl runs",
	}
	cmd.AddCommand(newImageBuildSimCommand())
	return cmd
}

func newImageBuildSimCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "build-sim",
		Short: "Write the raysim image (this rayctl as /usr/bin/ray, with a shell and wget) as an OCI tarball",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if out == "" {
				out = "raysim-" + Version + ".tar"
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			ref, err := image.BuildSimImage(f, image.SimImageOptions{RayBinary: self, Version: Version})
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(out)
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s)\n", out, ref)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the tarball to write (default raysim-<version>.tar)")
	return cmd
}
