package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	ctrd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// Exec runs cmd in the running container (its namespaces, user, env and
// working dir), connected to stdio, and returns its exit code.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, stdio runtime.ExecIO) (int, error) {
	ctx = r.ctx(ctx)
	if len(cmd) == 0 {
		return -1, errors.New("exec: empty command")
	}
	c, err := r.load(ctx, id)
	if err != nil {
		return -1, err
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return -1, fmt.Errorf("exec in container %s: it is not running", id)
	}
	if err != nil {
		return -1, err
	}
	if st, err := task.Status(ctx); err != nil || st.Status != ctrd.Running {
		return -1, fmt.Errorf("exec in container %s: it is not running (%s %v)", id, st.Status, err)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return -1, err
	}
	pspec := *spec.Process
	pspec.Args = cmd
	pspec.Terminal = stdio.TTY

	// Stdin goes through a pipe so its end can be passed on as CloseIO.
	var stdin io.Reader
	var stdinW *io.PipeWriter
	if stdio.Stdin != nil {
		var pr *io.PipeReader
		pr, stdinW = io.Pipe()
		stdin = pr
	}
	stdout, stderr := stdio.Stdout, stdio.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	opts := []cio.Opt{cio.WithStreams(stdin, stdout, stderr), cio.WithFIFODir(r.fifoDir)}
	if stdio.TTY {
		opts = append(opts, cio.WithTerminal)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	execID := "exec-" + hex.EncodeToString(b)
	proc, err := task.Exec(ctx, execID, &pspec, cio.NewCreator(opts...))
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	defer func() {
		dctx, cancel := r.teardownCtx(ctx)
		defer cancel()
		_, _ = proc.Delete(dctx, ctrd.WithProcessKill)
	}()
	exitC, err := proc.Wait(ctx)
	if err != nil {
		return -1, err
	}
	if err := proc.Start(ctx); err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, stdio.Stdin)
			stdinW.Close()
			_ = proc.CloseIO(ctx, ctrd.WithStdinCloser)
		}()
	}
	if stdio.TTY && stdio.Resize != nil {
		go func() {
			for size := range stdio.Resize {
				if err := proc.Resize(ctx, uint32(size.Width), uint32(size.Height)); err != nil {
					return
				}
			}
		}()
	}
	select {
	case st := <-exitC:
		proc.IO().Wait()
		code, _, err := st.Result()
		if err != nil {
			return -1, err
		}
		return int(code), nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}
