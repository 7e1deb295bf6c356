package textindex

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBlockRoundTrip(t *testing.T) {
	t.Parallel()
	ps := []Posting{
		{Ord: 7, TF: 1, Length: 12, Created: 1_700_000_000_000},
		{Ord: 9, TF: 3, Length: 400, Created: 1_600_000_000_000}, // imported: created before the one above
		{Ord: 1 << 40, TF: 70_000, Length: 1, Created: 1_700_000_000_001},
	}
	data := EncodeBlock(ps)
	got, err := DecodeBlock([]Posting{{Ord: 1}}, data)
	require.NoError(t, err)
	require.Equal(t, append([]Posting{{Ord: 1}}, ps...), got, "appended after what dst held")
	_, err = DecodeBlock(nil, data[:len(data)-1])
	require.ErrorIs(t, err, ErrCorruptBlock, "a block cut short")
}

func TestPackBlocks(t *testing.T) {
	t.Parallel()
	run := func(n int, from int64) []Posting {
		out := make([]Posting, n)
		for i := range out {
			out[i] = Posting{Ord: from + int64(i), TF: 1, Length: 5}
		}
		return out
	}
	touched := []Block{
		{Term: "full", Number: 3, Full: true},
		{Term: "room", Number: 0, Postings: run(BlockPostings-2, 100)},
		{Term: "drop", Number: 1, Postings: run(3, 10)},
	}
	moved := map[string][]Posting{
		"full":  run(2, 50_000),
		"room":  run(5, 50_000),
		"fresh": run(BlockPostings+1, 1),
	}
	dropped := map[string][]int64{"drop": {10, 11, 12}}
	blocks := map[string][]Block{}
	for _, b := range PackBlocks(touched, moved, dropped) {
		blocks[b.Term] = append(blocks[b.Term], b)
	}
	require.Len(t, blocks["full"], 1, "a full block is not rewritten")
	require.Equal(t, int32(4), blocks["full"][0].Number, "the moved postings start the block after it")
	require.Len(t, blocks["room"], 2)
	require.Equal(t, int32(0), blocks["room"][0].Number)
	require.Len(t, blocks["room"][0].Postings, BlockPostings, "the last block is filled first")
	require.Equal(t, int32(1), blocks["room"][1].Number)
	require.Len(t, blocks["room"][1].Postings, 3, "the rest in the next")
	require.Len(t, blocks["fresh"], 2)
	require.Equal(t, []int32{0, 1}, []int32{blocks["fresh"][0].Number, blocks["fresh"][1].Number})
	require.Len(t, blocks["drop"], 1)
	require.Empty(t, blocks["drop"][0].Postings, "a block whose every posting was dropped is written empty (deleted)")
}
