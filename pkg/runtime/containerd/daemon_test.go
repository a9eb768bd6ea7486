package containerd

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestStartPrivateAndStop(t *testing.T) {
	if !Available() {
		t.Skip("containerd is not installed (apt-get install -y containerd runc)")
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	d, err := StartPrivate(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Address, dir) || !strings.HasPrefix(d.FIFODir, dir) {
		t.Errorf("socket %s / FIFO dir %s are not under %s", d.Address, d.FIFODir, dir)
	}
	c, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Version(ctx)
	c.Close()
	if err != nil || v.Version == "" {
		t.Fatalf("version: %v %v", v, err)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Done():
	default:
		t.Fatal("containerd still running after Stop")
	}
}

func TestStartPrivateWithALongDirectory(t *testing.T) {
	if !Available() || os.Geteuid() != 0 {
		t.Skip("needs containerd and root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir() + "/" + strings.Repeat("d", 90)
	d, err := StartPrivate(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	if len(d.Address) > maxSocketPath {
		t.Fatalf("socket path %d bytes long", len(d.Address))
	}
}
