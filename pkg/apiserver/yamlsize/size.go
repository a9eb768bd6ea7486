// Package yamlsize bounds the work a YAML request body can cause. YAML's anchors and aliases let a small
// body stand for a much larger document: one long scalar anchored once and aliased a thousand times is
// half a megabyte on the wire and half a gigabyte once decoded. The YAML decoder the API server uses
// limits how many aliases a document has, not how large they make it, so this package measures the
// expanded size without expanding anything, before the body reaches a decoder.
package yamlsize

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// ErrTooLarge is returned (wrapped) by Size when a body expands past its limit.
var ErrTooLarge = errors.New("the YAML document expands past its limit")

// Size is what body, every document in it, amounts to with its aliases expanded: the bytes of every
// scalar plus one per node (a count a YAML document without aliases never takes past twice its own
// length). It parses body into node trees, which keep aliases as pointers, and counts each anchored
// node once however often it is aliased. Once the count passes limit it stops and returns an error
// wrapping ErrTooLarge; a body that cannot be parsed, or an alias that contains itself, is an error
// too.
func Size(body []byte, limit int64) (int64, error) {
	c := counter{limit: limit, memo: map[*yaml.Node]int64{}, open: map[*yaml.Node]bool{}}
	dec := yaml.NewDecoder(bytes.NewReader(body))
	var total int64
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return total, nil
		} else if err != nil {
			return total, err
		}
		c.base = total
		n, err := c.size(&doc)
		total += n
		if err != nil {
			return total, err
		}
	}
}

type counter struct {
	limit, base int64
	memo        map[*yaml.Node]int64 // anchored nodes already counted
	open        map[*yaml.Node]bool  // anchored nodes being counted (an alias to one is a cycle)
}

func (c *counter) size(n *yaml.Node) (int64, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return 0, fmt.Errorf("line %d: alias %q to no anchor", n.Line, n.Value)
		}
		return c.size(n.Alias)
	}
	if v, ok := c.memo[n]; ok {
		return c.check(v, n)
	}
	if c.open[n] {
		return 0, fmt.Errorf("line %d: anchor %q contains an alias to itself", n.Line, n.Anchor)
	}
	c.open[n] = true
	defer delete(c.open, n)
	total := 1 + int64(len(n.Value))
	for _, child := range n.Content {
		s, err := c.size(child)
		total += s
		if err != nil {
			return total, err
		}
		if _, err := c.check(total, n); err != nil {
			return total, err
		}
	}
	if n.Anchor != "" {
		c.memo[n] = total
	}
	return c.check(total, n)
}

// check returns v, and an error once v alone, or with the documents before, passes the limit.
func (c *counter) check(v int64, n *yaml.Node) (int64, error) {
	if c.base+v > c.limit {
		return v, fmt.Errorf("%w: more than %d bytes by line %d", ErrTooLarge, c.limit, n.Line)
	}
	return v, nil
}
