// Package crilog writes container output in the CRI log format the kubelet
// reads: one line per write, "<RFC3339Nano time> <stream> <F|P> <text>",
// where P marks a piece of a line longer than the buffer and F its end.
// Both of rayctl's runtimes (containerd and process) use it.
package crilog

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// MaxLine is the longest piece written as one record; longer lines are split
// into P records followed by an F record, as the CRI runtimes do.
const MaxLine = 16 * 1024

// File is a log file shared by a container's streams. Every record goes out
// in a single append write, so readers tailing the file (the kubelet serving
// `kubectl logs -f`) never see half records or interleaved streams.
type File struct {
	mu  sync.Mutex
	f   *os.File
	now func() time.Time
}

// Open opens (creating, appending to) the log file at path.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	return &File{f: f, now: time.Now}, nil
}

// Close closes the file.
func (l *File) Close() error { return l.f.Close() }

func (l *File) record(stream string, tag byte, text []byte) error {
	buf := make([]byte, 0, len(text)+64)
	buf = l.now().UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ', tag, ' ')
	buf = append(buf, text...)
	buf = append(buf, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.Write(buf)
	return err
}

// Stream returns a writer that turns what is written to it into records of
// the named stream ("stdout" or "stderr"), cutting at newlines (and at
// MaxLine). Close writes a last unterminated line as a full record.
func (l *File) Stream(stream string) *Stream {
	return &Stream{file: l, name: stream, buf: make([]byte, 0, MaxLine)}
}

// Stream is one stream's writer into a File; it is not safe for concurrent
// writes (give each stream its own).
type Stream struct {
	file *File
	name string
	buf  []byte
}

// Write records every complete line in p and keeps the rest for later.
func (s *Stream) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := MaxLine - len(s.buf)
			if len(p) < room {
				s.buf = append(s.buf, p...)
				break
			}
			s.buf = append(s.buf, p[:room]...)
			p = p[room:]
			if err := s.flush('P'); err != nil {
				return 0, err
			}
			continue
		}
		line := p[:i]
		p = p[i+1:]
		for len(s.buf)+len(line) > MaxLine {
			room := MaxLine - len(s.buf)
			s.buf = append(s.buf, line[:room]...)
			line = line[room:]
			if err := s.flush('P'); err != nil {
				return 0, err
			}
		}
		s.buf = append(s.buf, line...)
		if err := s.flush('F'); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (s *Stream) flush(tag byte) error {
	err := s.file.record(s.name, tag, s.buf)
	s.buf = s.buf[:0]
	return err
}

// Close records a pending unterminated line; the File stays open.
func (s *Stream) Close() error {
	if len(s.buf) == 0 {
		return nil
	}
	return s.flush('F')
}

// Copy reads r until EOF or an error and writes its lines to the file as
// the named stream, then closes the stream.
func (l *File) Copy(stream string, r io.Reader) error {
	s := l.Stream(stream)
	_, err := io.Copy(s, r)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", stream, err)
	}
	return nil
}

// Line is one parsed record.
type Line struct {
	Time    time.Time
	Stream  string
	Partial bool
	Text    string
}

// Parse reads one record (without its newline).
func Parse(record string) (Line, error) {
	parts := bytes.SplitN([]byte(record), []byte{' '}, 4)
	if len(parts) < 3 {
		return Line{}, fmt.Errorf("not a CRI log record: %q", record)
	}
	t, err := time.Parse(time.RFC3339Nano, string(parts[0]))
	if err != nil {
		return Line{}, fmt.Errorf("CRI log record time: %w", err)
	}
	ln := Line{Time: t, Stream: string(parts[1]), Partial: string(parts[2]) == "P"}
	if len(parts) == 4 {
		ln.Text = string(parts[3])
	}
	return ln, nil
}
