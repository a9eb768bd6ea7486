package kubeletapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// LogOptions select what part of a container log to return, as the pods/log query parameters do.
type LogOptions struct {
	// Follow keeps streaming while the container runs.
	Follow bool
	// TailLines, when >= 0, starts that many lines before the end.
	TailLines int64
	// Since drops lines written before it (zero keeps all).
	Since time.Time
	// Timestamps prefixes each line with its RFC3339Nano time.
	Timestamps bool
	// LimitBytes, when > 0, stops after that many bytes of output.
	LimitBytes int64
}

func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, name := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q := r.URL.Query()
	ref, err := s.cfg.Pods.Container(ns, pod, name)
	if err != nil {
		writeError(w, err)
		return
	}
	opts := LogOptions{TailLines: -1, Follow: boolParam(q.Get("follow")), Timestamps: boolParam(q.Get("timestamps"))}
	if v := q.Get("tailLines"); v != "" {
		if opts.TailLines, err = strconv.ParseInt(v, 10, 64); err != nil || opts.TailLines < 0 {
			http.Error(w, "tailLines must be a non-negative integer", http.StatusBadRequest)
			return
		}
	}
	if v := q.Get("limitBytes"); v != "" {
		if opts.LimitBytes, err = strconv.ParseInt(v, 10, 64); err != nil || opts.LimitBytes <= 0 {
			http.Error(w, "limitBytes must be a positive integer", http.StatusBadRequest)
			return
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			http.Error(w, "sinceSeconds must be a positive integer", http.StatusBadRequest)
			return
		}
		opts.Since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			http.Error(w, "sinceTime must be RFC3339", http.StatusBadRequest)
			return
		}
		opts.Since = t
	}
	path := ref.LogPath
	running := func() bool {
		cur, err := s.cfg.Pods.Container(ns, pod, name)
		return err == nil && cur.ID == ref.ID && cur.Running
	}
	if boolParam(q.Get("previous")) {
		if ref.PreviousLogPath == "" {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", name, pod), http.StatusBadRequest)
			return
		}
		path = ref.PreviousLogPath
		opts.Follow = false
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// The container was created but wrote nothing yet.
			w.Header().Set("Content-Type", "text/plain")
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Cache-Control", "no-cache")
	var out io.Writer = w
	if fl, ok := w.(http.Flusher); ok && opts.Follow {
		out = flushWriter{w, fl}
	}
	_ = ReadLog(r.Context(), f, opts, running, s.cfg.FollowPoll, out)
}

func boolParam(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

type flushWriter struct {
	w io.Writer
	f http.Flusher
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	fw.f.Flush()
	return n, err
}

var errLimit = errors.New("limit reached")

// ReadLog copies the messages of a CRI-format log ("<time> <stream> <P|F> <message>" lines) from f to
// out per opts. Partial (P) entries are joined with the entry that follows. When following, it waits
// for more lines while running reports true, checking every poll, until ctx ends.
func ReadLog(ctx context.Context, f *os.File, opts LogOptions, running func() bool, poll time.Duration, out io.Writer) error {
	if opts.TailLines >= 0 {
		off, err := tailOffset(f, opts.TailLines)
		if err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	written := int64(0)
	emit := func(p []byte) error {
		if opts.LimitBytes > 0 {
			room := opts.LimitBytes - written
			if room <= 0 {
				return errLimit
			}
			if int64(len(p)) > room {
				p = p[:room]
				written += int64(len(p))
				_, _ = out.Write(p)
				return errLimit
			}
		}
		written += int64(len(p))
		_, err := out.Write(p)
		return err
	}
	handle := func(line []byte) error {
		e, ok := parseCRI(line)
		if !ok || (!opts.Since.IsZero() && e.time.Before(opts.Since)) {
			return nil
		}
		var msg []byte
		if opts.Timestamps {
			msg = append(msg, e.rawTime...)
			msg = append(msg, ' ')
		}
		msg = append(msg, e.message...)
		if !e.partial {
			msg = append(msg, '\n')
		}
		return emit(msg)
	}
	chunk := make([]byte, 32*1024)
	var buf []byte
	stopping := false
	for {
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			if herr := handle(buf[:i]); herr != nil {
				if errors.Is(herr, errLimit) {
					return nil
				}
				return herr
			}
			buf = buf[i+1:]
		}
		if err == nil && n > 0 {
			continue
		}
		if err != nil && err != io.EOF {
			return err
		}
		// At the end of what is written so far.
		if !opts.Follow || stopping {
			return nil
		}
		if !running() {
			// The container stopped: read what it wrote last, then end.
			stopping = true
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

type entry struct {
	rawTime []byte
	time    time.Time
	partial bool
	message []byte
}

// parseCRI parses one CRI log line without its newline.
func parseCRI(line []byte) (entry, bool) {
	var e entry
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return e, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return e, false
	}
	_, rest, ok = bytes.Cut(rest, []byte{' '}) // stream
	if !ok {
		return e, false
	}
	tag, msg, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// An empty message may lack the separator.
		tag, msg = rest, nil
	}
	e.rawTime, e.time, e.partial, e.message = ts, t, bytes.Equal(tag, []byte("P")), msg
	return e, true
}

// tailOffset returns where the last n lines of f start.
func tailOffset(f *os.File, n int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if n == 0 {
		return size, nil
	}
	const chunk = 64 * 1024
	buf := make([]byte, chunk)
	pos := size
	found := int64(0)
	// A final newline ends the last line rather than starting a new one.
	first := true
	for pos > 0 {
		readSize := int64(chunk)
		if pos < readSize {
			readSize = pos
		}
		pos -= readSize
		if _, err := f.ReadAt(buf[:readSize], pos); err != nil && err != io.EOF {
			return 0, err
		}
		for i := readSize - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				first = false
				continue
			}
			if first {
				first = false
				continue
			}
			found++
			if found == n {
				return pos + i + 1, nil
			}
		}
	}
	return 0, nil
}

func writeError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if errors.Is(err, ErrNotReady) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
