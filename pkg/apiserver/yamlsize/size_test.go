package yamlsize

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// bomb is one scalar of n bytes anchored once and aliased k times.
func bomb(n, k int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n  a: &a " + strings.Repeat("x", n) + "\n")
	for i := range k {
		fmt.Fprintf(&b, "  k%d: *a\n", i)
	}
	return b.String()
}

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		limit   int64
		want    int64 // -1: ErrTooLarge; -2: another error
		atLeast bool
	}{
		{name: "plain", body: "a: b\nc: [1, 2]\n", limit: 100, want: 1 + 1 + 2 + 2 + 2 + 1 + 2 + 2}, // doc, map, a, b, c, seq, 1, 2: one per node and its bytes
		{name: "alias counted expanded", body: "a: &x hello\nb: *x\nc: *x\n", limit: 100, want: 1 + 1 + 2 + 6 + 2 + 6 + 2 + 6},
		{name: "nested anchors", body: "a: &x [&y abc, *y]\nb: [*x, *x]\n", limit: 1000, want: -0},
		{name: "bomb", body: bomb(512<<10, 1000), limit: 3 << 20, want: -1},
		{name: "small bomb fits", body: bomb(10, 10), limit: 3 << 20, atLeast: true, want: 110},
		{name: "billion laughs", body: "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n", limit: 3 << 20, want: -1},
		{name: "merge keys", body: "a: &a {x: 1}\nb: {<<: *a, y: 2}\n", limit: 100, atLeast: true, want: 10},
		{name: "two documents add up", body: "a: &a " + strings.Repeat("x", 60) + "\nb: *a\n---\nc: &c " + strings.Repeat("y", 60) + "\nd: *c\n", limit: 200, want: -1},
		{name: "unparsable", body: "a: [unclosed\n", limit: 100, want: -2},
		{name: "undefined alias", body: "a: *nope\n", limit: 100, want: -2},
		{name: "empty", body: "", limit: 100, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Size([]byte(tc.body), tc.limit)
			switch {
			case tc.want == -1:
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("Size = %d, %v; want ErrTooLarge", got, err)
				}
			case tc.want == -2:
				if err == nil || errors.Is(err, ErrTooLarge) {
					t.Fatalf("Size = %d, %v; want a parse error", got, err)
				}
			case err != nil:
				t.Fatalf("Size: %v", err)
			case tc.atLeast && got < tc.want, !tc.atLeast && tc.want > 0 && got != tc.want:
				t.Fatalf("Size = %d, want %d", got, tc.want)
			}
			t.Logf("%d (err %v)", got, err)
		})
	}
}

// A document without aliases never counts past twice its length (the filter's limit rests on that).
func TestSizeWithoutAliasesWithinTwiceTheBody(t *testing.T) {
	for _, body := range []string{
		"a:\nb:\nc:\n", "[a,b,c,[],{},[[[]]]]", "-\n-\n-\n", "{a: {b: {c: [1,2,3]}}}", "x", "'it''s'\n", "|\n  line\n  line\n",
		bomb(100, 0), strings.Repeat("- a\n", 1000), strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		got, err := Size([]byte(body), 1<<30)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if got > 2*int64(len(body))+2 {
			t.Errorf("%q (%d bytes) counts %d", body, len(body), got)
		}
	}
}

func FuzzSize(f *testing.F) {
	f.Add([]byte("a: &a [x]\nb: *a\n"), int64(100))
	f.Add([]byte(bomb(100, 100)), int64(1000))
	f.Add([]byte("a: &a [*a]\n"), int64(100))
	f.Fuzz(func(t *testing.T, body []byte, limit int64) {
		n, err := Size(body, limit)
		if err == nil && n > limit && limit >= 0 {
			t.Fatalf("Size = %d past the limit %d without an error", n, limit)
		}
	})
}
