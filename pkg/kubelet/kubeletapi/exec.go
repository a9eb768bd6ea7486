package kubeletapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// execProtocol is the remote command subprotocol served over SPDY: v4 adds exit codes (as a
// metav1.Status on the error stream) to v3's terminal resizing.
const execProtocol = "v4.channel.k8s.io"

// The timeouts of exec and port-forward streams, the kubelet's defaults.
const (
	// streamCreationTimeout bounds how long the client may take to open its streams.
	streamCreationTimeout = 30 * time.Second
	// streamIdleTimeout ends a connection that carried nothing for this long.
	streamIdleTimeout = 4 * time.Hour
)

type streamAndReply struct {
	stream    httpstream.Stream
	replySent <-chan struct{}
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	ns, pod, name := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 {
		http.Error(w, "you must specify at least one command for the container", http.StatusBadRequest)
		return
	}
	wantStdin, wantStdout, wantStderr, tty := boolParam(q.Get("stdin")), boolParam(q.Get("stdout")), boolParam(q.Get("stderr")), boolParam(q.Get("tty"))
	if tty {
		wantStderr = false
	}
	if !wantStdin && !wantStdout && !wantStderr {
		http.Error(w, "you must specify at least one of stdin, stdout, stderr", http.StatusBadRequest)
		return
	}
	ref, err := s.cfg.Pods.Container(ns, pod, name)
	if err != nil {
		writeError(w, err)
		return
	}
	if !ref.Running {
		http.Error(w, fmt.Sprintf("container %s is not running", name), http.StatusBadRequest)
		return
	}
	if !httpstream.IsUpgradeRequest(r) {
		http.Error(w, "exec needs an upgrade to SPDY ("+execProtocol+")", http.StatusBadRequest)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{execProtocol}); err != nil {
		return // Handshake wrote the error.
	}
	streams := make(chan streamAndReply, 8)
	conn := spdy.NewResponseUpgraderWithPings(30*time.Second).UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		streams <- streamAndReply{st, replySent}
		return nil
	})
	if conn == nil {
		return // The upgrader wrote the error.
	}
	defer conn.Close()
	conn.SetIdleTimeout(streamIdleTimeout)

	var errStream, stdin, stdout, stderr, resize httpstream.Stream
	expected := 1
	for _, b := range []bool{wantStdin, wantStdout, wantStderr, tty} {
		if b {
			expected++
		}
	}
	var replies []<-chan struct{}
	timeout := time.After(streamCreationTimeout)
	for got := 0; got < expected; {
		select {
		case sr := <-streams:
			switch sr.stream.Headers().Get("streamType") {
			case "error":
				errStream = sr.stream
			case "stdin":
				stdin = sr.stream
			case "stdout":
				stdout = sr.stream
			case "stderr":
				stderr = sr.stream
			case "resize":
				resize = sr.stream
			default:
				continue
			}
			replies = append(replies, sr.replySent)
			got++
		case <-timeout:
			return
		case <-conn.CloseChan():
			return
		}
	}
	for _, c := range replies {
		<-c
	}
	if errStream == nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-conn.CloseChan():
			cancel()
		case <-ctx.Done():
		}
	}()
	stdio := runtime.ExecIO{TTY: tty}
	if stdin != nil {
		stdio.Stdin = stdin
	}
	if stdout != nil {
		stdio.Stdout = stdout
	}
	if stderr != nil {
		stdio.Stderr = stderr
	}
	if resize != nil {
		sizes := make(chan runtime.TerminalSize, 4)
		stdio.Resize = sizes
		go readSizes(ctx, resize, sizes)
	}
	code, err := s.cfg.Runtime.Exec(ctx, ref.ID, cmd, stdio)
	if stdout != nil {
		stdout.Close()
	}
	if stderr != nil {
		stderr.Close()
	}
	_ = json.NewEncoder(errStream).Encode(execStatus(code, err))
	errStream.Close()
}

// execStatus is the v4 protocol's final word: Success, or Failure with the exit code as a cause.
func execStatus(code int, err error) *metav1.Status {
	switch {
	case err != nil:
		st := apierrors.NewInternalError(err).ErrStatus
		return &st
	case code == 0:
		return &metav1.Status{Status: metav1.StatusSuccess}
	}
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Reason:  "NonZeroExitCode",
		Message: fmt.Sprintf("command terminated with non-zero exit code: error executing command, exit status %d", code),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(code)}}},
	}
}

// readSizes decodes the resize stream's JSON terminal sizes.
func readSizes(ctx context.Context, r io.Reader, out chan<- runtime.TerminalSize) {
	defer close(out)
	dec := json.NewDecoder(r)
	for {
		var size struct{ Width, Height uint16 }
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case out <- runtime.TerminalSize{Width: size.Width, Height: size.Height}:
		case <-ctx.Done():
			return
		}
	}
}
