package safefile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ErrLineTooLong reports a line longer than its kind's line limit.
var ErrLineTooLong = errors.New("line longer than the limit")

// LineReader reads a file line by line, refusing a line longer than the limit of its kind as soon
// as the limit is passed: a file without newlines (or a 50 MB line) costs at most the limit in
// memory, never the whole file.
type LineReader struct {
	c    io.Closer
	r    *bufio.Reader
	path string
	kind Kind
	max  int
	line int
}

func newLineReader(rc io.ReadCloser, path string, k Kind, max int) *LineReader {
	// The buffer holds a whole line and its newline, so ReadSlice finds every line within it.
	return &LineReader{c: rc, r: bufio.NewReaderSize(rc, max+1), path: path, kind: k, max: max}
}

// Next returns the next line with its "\n" (the last line of a file may lack one), so that the
// lines concatenated are the file's bytes; io.EOF after the last. The slice is valid only until
// the next call. A line longer than the limit is an error (ErrLineTooLong) naming the file, the
// line number and the limit.
func (l *LineReader) Next() ([]byte, error) {
	b, err := l.r.ReadSlice('\n')
	if len(b) == 0 && err == io.EOF {
		return nil, io.EOF
	}
	l.line++
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(b) > l.max+1 || (len(b) > l.max && b[len(b)-1] != '\n'):
		return nil, fmt.Errorf("%s:%d: %w of %d bytes for a %s", l.path, l.line, ErrLineTooLong, l.max, l.kind)
	case err != nil && err != io.EOF:
		return nil, fmt.Errorf("%s:%d: %w", l.path, l.line, err)
	}
	return b, nil
}

// Line is the number of the line Next returned last (1-based).
func (l *LineReader) Line() int { return l.line }

// Path is the file's path.
func (l *LineReader) Path() string { return l.path }

// Close closes the file.
func (l *LineReader) Close() error { return l.c.Close() }
