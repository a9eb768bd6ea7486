package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// What `--ray` may say runs Ray's images.
const (
	rayAuto = "auto"
	rayHost = "host"
	raySim  = "sim"
)

// findRay starts looking for the host's Ray as o says and returns a function that waits for the answer:
// the Ray to run Ray's images on, or nil for raysim; an error only when --ray=host finds none, or
// --ray is not one of auto, host, sim.
func findRay(ctx context.Context, o *upOptions, dir *datadir.Dir) func() (*hostray.Ray, error) {
	type answer struct {
		ray *hostray.Ray
		err error
	}
	done := make(chan answer, 1)
	switch o.ray {
	case raySim:
		done <- answer{}
	case rayAuto, rayHost:
		go func() {
			r, err := hostray.Find(ctx, hostray.Candidates(o.rayPath), o.rayPath != "", dir.Join("hostray.json"))
			switch {
			case err == nil:
				done <- answer{ray: r}
			case o.ray == rayHost || o.rayPath != "":
				done <- answer{err: fmt.Errorf("--ray=%s: %w", o.ray, err)}
			case errors.Is(err, hostray.ErrNotFound):
				done <- answer{} // raysim, as without Ray
			default:
				done <- answer{err: err}
			}
		}()
	default:
		done <- answer{err: fmt.Errorf("--ray=%q: want %s, %s or %s", o.ray, rayAuto, rayHost, raySim)}
	}
	return func() (*hostray.Ray, error) {
		a := <-done
		return a.ray, a.err
	}
}

// rayLine says, for the start-up's "ray" line, what runs Ray's images and raysim's on runtime, as
// --ray=mode chose.
func rayLine(ray *hostray.Ray, mode, runtime string) string {
	sim := "raysim for " + SimImageRef
	switch {
	case runtime != selector.Process:
		if ray != nil {
			return fmt.Sprintf("the %s runtime runs images: rayproject/ray images are pulled (%s is used by --runtime process); %s", runtime, ray, sim)
		}
		return fmt.Sprintf("the %s runtime runs images: rayproject/ray images are pulled; %s", runtime, sim)
	case ray != nil:
		return fmt.Sprintf("%s for rayproject/ray images; %s", ray, sim)
	case mode == raySim:
		return "raysim for rayproject/ray images and " + SimImageRef + " (--ray=sim)"
	}
	return "no Ray on this host (make ray installs one): raysim for rayproject/ray images and " + SimImageRef
}
