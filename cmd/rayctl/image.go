package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rayctl/rayctl/pkg/controlplane"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/image"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

func newImageCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Work with the container images rayctl runs",
	}
	cmd.AddCommand(newImageBuildSimCommand(), newImageLoadCommand(g), newImageListCommand(g))
	return cmd
}

func newImageLoadCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "load FILE...",
		Short: "Import OCI or docker image tarballs into rayctl's container runtime (no registry needed)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			choice, err := openImageRuntime(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer choice.Close()
			for _, path := range args {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				names, err := choice.Runtime.ImportImage(cmd.Context(), f)
				f.Close()
				if err != nil {
					return fmt.Errorf("loading %s: %w", path, err)
				}
				for _, n := range names {
					fmt.Fprintf(cmd.OutOrStdout(), "loaded %s\n", n)
				}
			}
			return nil
		},
	}
}

func newImageListCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images in rayctl's container runtime",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			choice, err := openImageRuntime(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer choice.Close()
			images, err := choice.Runtime.ListImages(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
			fmt.Fprintln(w, "IMAGE\tID\tSIZE")
			for _, img := range images {
				id := img.ID
				if len(id) > 19 {
					id = id[:19]
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", img.Ref, id, humanBytes(img.Size))
			}
			return w.Flush()
		},
	}
}

// openImageRuntime opens the data dir g names and the container runtime that holds its images.
func openImageRuntime(ctx context.Context, g *globalFlags) (*selector.Choice, error) {
	dir, err := datadir.Open(g.dataDir)
	if err != nil {
		return nil, err
	}
	return controlplane.OpenRuntime(ctx, dir)
}

func humanBytes(n int64) string {
	switch {
	case n <= 0:
		return "-"
	case n < 1<<20:
		return fmt.Sprintf("%.0fKiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
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
