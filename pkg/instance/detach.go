package instance

import (
	"context"
	"fmt"
	"os"

	"github.com/rayctl/rayctl/pkg/datadir"
)

// StartDetached starts `rayctl up` as o says, as a background process in a session of its own that
// outlives this one, its output in the data dir's rayctl.out, and waits until it is ready: `rayctl up
// --detach` and `rayctl demo --start`. o.Binary defaults to this executable; o.Log and o.Detach are
// set here. A rayctl already running on the data dir is refused.
func StartDetached(ctx context.Context, o Options) (*Process, error) {
	dir, err := datadir.Open(o.DataDir)
	if err != nil {
		return nil, err
	}
	if st, err := dir.ReadState(); err == nil {
		return nil, fmt.Errorf("rayctl is already running in %s (pid %d, %s)", dir.Path, st.PID, st.Server)
	}
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	logFile, err := os.OpenFile(dir.Join("rayctl.out"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	o.DataDir, o.Log, o.Detach = dir.Path, logFile, true
	return Start(ctx, o)
}
