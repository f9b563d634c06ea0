package main

import (
	"fmt"
	"strings"

	"github.com/msccl-go/msccl-go/compiler"
	"github.com/msccl-go/msccl-go/internal/size"
	"gopkg.in/yaml.v3"
)

// mergeTable returns the selection table shipped (its text) with the
// single-node rows of collective that hold a world of ranks handing that
// world to tuned: each such row keeps the world sizes on either side of
// ranks (as one or two rows), and the tuned rows go where the first of
// them stood. Every other line (comments, other rows) is kept as it is,
// so that the result can replace algorithms/selection.yaml and its diff
// shows only what tuning changed. Below the tuned rows' first size (the
// smallest the tuner timed) the world keeps its built-in rows, cut off
// there, ahead of the tuned ones.
func mergeTable(shipped []byte, collective string, ranks int64, tuned []compiler.SelectionRow, note string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(shipped, &doc); err != nil {
		return nil, fmt.Errorf("the built-in selection table: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("the built-in selection table is not a list of rows")
	}
	below, err := rowsBelow(doc.Content[0].Content, collective, ranks, tuned)
	if err != nil {
		return nil, err
	}
	tunedText := formatRows(append(below, tuned...))
	lines := strings.SplitAfter(string(shipped), "\n")
	var out strings.Builder
	next := 0 // the first line (0-based) not yet copied
	placed := false
	for _, item := range doc.Content[0].Content {
		var row compiler.SelectionRow
		if err := item.Decode(&row); err != nil {
			return nil, fmt.Errorf("the built-in selection table, line %d: %w", item.Line, err)
		}
		if row.Collective != collective || row.MultiNode || !inRange(row.Ranks, ranks) || !inRange(row.RanksPerNode, ranks) {
			continue
		}
		if row.Ranks == nil {
			return nil, fmt.Errorf("the built-in selection table, line %d: a %s row without ranks: cannot carve out %d ranks", item.Line, collective, ranks)
		}
		var rows []compiler.SelectionRow
		if row.Ranks[0] < ranks {
			r := row
			r.Ranks = []int64{row.Ranks[0], ranks - 1}
			rows = append(rows, r)
		}
		if row.Ranks[1] > ranks {
			r := row
			r.Ranks = []int64{ranks + 1, row.Ranks[1]}
			rows = append(rows, r)
		}
		// The row's text: from its "- " line to its last line.
		first, last := item.Line-1, lastLine(item)-1
		keep := first
		if !placed && len(rows) == 0 {
			// A comment right above the first row of this world alone
			// says how that row was made (a tune's note): the note
			// replaces it, or tables tuned twice stack stale notes.
			for keep > next && strings.HasPrefix(strings.TrimSpace(lines[keep-1]), "#") {
				keep--
			}
		}
		for _, l := range lines[next:keep] {
			out.WriteString(l)
		}
		next = last + 1
		text := formatRows(rows)
		if !placed {
			placed = true
			if text != "" {
				text += "\n"
			}
			text += note + tunedText
		}
		if text == "" {
			// The row was for this world only: drop it and the blank
			// line after it.
			for next < len(lines) && strings.TrimSpace(lines[next]) == "" {
				next++
			}
			continue
		}
		out.WriteString(text)
	}
	for _, l := range lines[next:] {
		out.WriteString(l)
	}
	if !placed {
		// No row held this world: the tuned rows go at the end.
		s := strings.TrimRight(out.String(), "\n")
		out.Reset()
		out.WriteString(s + "\n\n" + note + tunedText)
	}
	return []byte(out.String()), nil
}

// rowsBelow returns, for the world of ranks, the built-in single-node rows
// of collective that start below the tuned rows' first size, cut off
// there and narrowed to that world.
func rowsBelow(items []*yaml.Node, collective string, ranks int64, tuned []compiler.SelectionRow) ([]compiler.SelectionRow, error) {
	if len(tuned) == 0 {
		return nil, nil
	}
	start, err := size.ParseBound(tuned[0].MinSize, 0)
	if err != nil || start == 0 {
		return nil, err
	}
	var out []compiler.SelectionRow
	for _, item := range items {
		var row compiler.SelectionRow
		if err := item.Decode(&row); err != nil {
			return nil, fmt.Errorf("the built-in selection table, line %d: %w", item.Line, err)
		}
		if row.Collective != collective || row.MultiNode || !inRange(row.Ranks, ranks) || !inRange(row.RanksPerNode, ranks) {
			continue
		}
		lo, err := size.ParseBound(row.MinSize, 0)
		if err != nil {
			return nil, fmt.Errorf("the built-in selection table, line %d: min_message_size: %w", item.Line, err)
		}
		hi, err := size.ParseBound(row.MaxSize, size.Inf)
		if err != nil {
			return nil, fmt.Errorf("the built-in selection table, line %d: max_message_size: %w", item.Line, err)
		}
		if lo >= start {
			continue
		}
		row.Ranks, row.RanksPerNode = []int64{ranks, ranks}, []int64{ranks, ranks}
		row.MaxSize = size.FormatBound(min(hi, start))
		out = append(out, row)
	}
	return out, nil
}

// lastLine is the last source line of a node and everything under it.
func lastLine(n *yaml.Node) int {
	l := n.Line
	for _, c := range n.Content {
		l = max(l, lastLine(c))
	}
	return l
}
