package textindex

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
)

// Posting is one term's occurrence in a document: the document's ordinal (its entry's
// text_ord), how often the document holds the term, the document's length and its
// entry's creation time.
type Posting struct {
	Ord     int64
	TF      int32
	Length  int32
	Created int64
}

// BlockPostings is how many postings a block of entry_text_blocks holds at most
// (about 40 kB): a pack rewrites a term's last block while it has room, so a block
// bounds what one pack rewrites per term.
const BlockPostings = 8192

// EncodeBlock packs postings sorted by ordinal: per posting, the ordinal's distance
// from the one before (the first's from 0) and its tf and length as unsigned varints,
// and its creation time's distance from the one before as a signed varint.
func EncodeBlock(ps []Posting) []byte {
	out := make([]byte, 0, 6*len(ps))
	var ord, created int64
	for _, p := range ps {
		out = binary.AppendUvarint(out, uint64(p.Ord-ord))
		out = binary.AppendUvarint(out, uint64(p.TF))
		out = binary.AppendUvarint(out, uint64(p.Length))
		out = binary.AppendVarint(out, p.Created-created)
		ord, created = p.Ord, p.Created
	}
	return out
}

// ErrCorruptBlock is DecodeBlock's error for data that is not a block.
var ErrCorruptBlock = errors.New("a block of packed postings does not decode")

// DecodeBlock appends the postings of data to dst.
func DecodeBlock(dst []Posting, data []byte) ([]Posting, error) {
	var ord, created int64
	for len(data) > 0 {
		var fields [3]uint64
		for i := range fields {
			v, n := binary.Uvarint(data)
			if n <= 0 {
				return dst, ErrCorruptBlock
			}
			fields[i], data = v, data[n:]
		}
		d, n := binary.Varint(data)
		if n <= 0 {
			return dst, ErrCorruptBlock
		}
		data = data[n:]
		ord += int64(fields[0])
		created += d
		dst = append(dst, Posting{Ord: ord, TF: int32(fields[1]), Length: int32(fields[2]), Created: created})
	}
	return dst, nil
}

// ByOrd orders postings by ordinal, for slices.SortFunc.
func ByOrd(a, b Posting) int { return cmp.Compare(a.Ord, b.Ord) }

// Block is a block of a term as a pack rewrites it.
type Block struct {
	Term     string
	Number   int32
	Full     bool // read for its number only: its postings are not read, nor written
	Postings []Posting
}

// PackBlocks returns the blocks a pack writes: the touched blocks without the dropped
// ordinals (an emptied block is written empty, and then deleted), each term's moved
// postings merged into its last block while it has room and into new blocks after it.
// A full last block is not written unless a dropped ordinal made room in it.
func PackBlocks(touched []Block, moved map[string][]Posting, dropped map[string][]int64) []Block {
	last := map[string]int{} // the term's touched block of the highest number
	for i := range touched {
		b := &touched[i]
		if gone := dropped[b.Term]; len(gone) > 0 && !b.Full {
			set := make(map[int64]bool, len(gone))
			for _, o := range gone {
				set[o] = true
			}
			b.Postings = slices.DeleteFunc(b.Postings, func(p Posting) bool { return set[p.Ord] })
		}
		if j, ok := last[b.Term]; !ok || touched[j].Number < b.Number {
			last[b.Term] = i
		}
	}
	out := slices.DeleteFunc(slices.Clone(touched), func(b Block) bool { return b.Full })
	for term, ps := range moved {
		next := int32(0)
		if i, ok := last[term]; ok {
			b := touched[i]
			next = b.Number + 1
			if !b.Full {
				room := max(BlockPostings-len(b.Postings), 0)
				merged := append(b.Postings, ps[:min(room, len(ps))]...)
				slices.SortFunc(merged, ByOrd)
				ps = ps[min(room, len(ps)):]
				j := slices.IndexFunc(out, func(o Block) bool { return o.Term == term && o.Number == b.Number })
				out[j].Postings = merged
			}
		}
		for len(ps) > 0 {
			n := min(BlockPostings, len(ps))
			out = append(out, Block{Term: term, Number: next, Postings: ps[:n]})
			ps, next = ps[n:], next+1
		}
	}
	return out
}
