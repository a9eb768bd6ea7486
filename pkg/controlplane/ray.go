package controlplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/runtime/hostray"
	"github.com/rayctl/rayctl/pkg/runtime/selector"
)

// findRay starts looking for the host's Ray as cfg says and returns a function that waits for the answer:
// the Ray found, or nil; an error only when --ray=host or --ray-path finds none. --ray=image and
// --ray=sim do not look.
func findRay(ctx context.Context, o Config, dir *datadir.Dir) func() (*hostray.Ray, error) {
	type answer struct {
		ray *hostray.Ray
		err error
	}
	done := make(chan answer, 1)
	switch o.Ray {
	case selector.RayAuto, selector.RayHost:
		go func() {
			r, err := hostray.Find(ctx, hostray.Candidates(o.RayPath), o.RayPath != "", hostray.CacheFile(dir.Join("hostray.json")))
			switch {
			case err == nil:
				done <- answer{ray: r}
			case o.Ray == selector.RayHost || o.RayPath != "":
				done <- answer{err: fmt.Errorf("--ray=%s: %w", o.Ray, err)}
			case errors.Is(err, hostray.ErrNotFound):
				done <- answer{} // raysim, as without Ray
			default:
				done <- answer{err: err}
			}
		}()
	default:
		done <- answer{} // the runtime's choice says whether --ray is valid
	}
	return func() (*hostray.Ray, error) {
		a := <-done
		return a.ray, a.err
	}
}

// rayLine says, for the start-up's "ray" line, what runs Ray's images and raysim's on the runtime
// chosen; found is the host's Ray (nil: none), mode what --ray said.
func rayLine(c *selector.Choice, found *hostray.Ray, mode string) string {
	sim := "raysim for " + SimImageRef
	switch {
	case c.Name == selector.Fake:
		return "the fake runtime runs no processes: no Ray, no raysim"
	case c.Name == selector.PerPod && c.Ray == selector.RayHost:
		return fmt.Sprintf("%s for rayproject/ray images (process runtime); containerd runs %s (raysim inside) and every other image", c.HostRay, SimImageRef)
	case c.Name == selector.PerPod:
		return fmt.Sprintf("raysim for rayproject/ray images (process runtime); containerd runs %s and every other image", SimImageRef)
	case c.Ray == selector.RayHost:
		return fmt.Sprintf("%s for rayproject/ray images; %s", c.HostRay, sim)
	case c.Ray == selector.RayImage && found != nil:
		return fmt.Sprintf("the %s runtime pulls rayproject/ray images from their registry (%s runs them with --ray=host); %s", c.Name, found, sim)
	case c.Ray == selector.RayImage:
		return fmt.Sprintf("the %s runtime pulls rayproject/ray images from their registry; %s", c.Name, sim)
	case mode == selector.RaySim:
		return "raysim for rayproject/ray images and " + SimImageRef + " (--ray=sim)"
	}
	return "no Ray on this host (make ray installs one): raysim for rayproject/ray images and " + SimImageRef
}
