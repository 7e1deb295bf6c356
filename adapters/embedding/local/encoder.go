package local

import (
	"fmt"
	"math"
	"slices"
)

// Sizes of the graph, confirmed against the weights' shapes when the model loads.
const (
	vocabRows    = 8002 // rows of module/Embeddings_en
	embedDim     = 256  // piece embeddings, and the first layer's input
	modelDim     = 512  // every layer's output, the pooled vector and the result
	ffnDim       = 1536 // the feed-forward blocks' hidden width
	heads        = 4    // attention heads of both layers
	timingScales = 128  // sine and cosine channels of the timing signal, each
)

// Graph node names of the weights (model.json). The graph is a TF-Hub "Kona"
// transformer: Encode/Layer_N holds most variables, Encode/TransformerStack/Layer_N the
// constants folded into that layer's ops.
const (
	kona  = "module_apply_default/Encoder_en/KonaTransformer/"
	konaV = "module/Encoder_en/KonaTransformer/"
)

// layer is one pre-norm transformer layer: x += attention(norm(x)), then
// x += ffn(norm(x)). The first layer widens 256 → 512, so its attention output and its
// residual (AdjustResidualInput, a dense layer) both land in 512 dimensions.
type layer struct {
	in                  int
	attnScale, attnBias []float32 // layer norm before attention (width in)
	qkv                 *matrix   // in → 3·in: queries, keys, values
	qkvBias             []float32
	qScale              float32 // 1/sqrt(head width), applied to the queries
	out                 *matrix // in → modelDim
	outBias             []float32
	residual            *matrix // in → modelDim; nil when the residual is x itself
	residualBias        []float32
	ffnScale, ffnBias   []float32 // layer norm before the feed-forward block
	ffn1                *matrix   // modelDim → ffnDim, then ReLU
	ffn1Bias            []float32
	ffn2                *matrix // ffnDim → modelDim
	ffn2Bias            []float32
}

// encoder is the graph's forward pass. It is read-only after newEncoder.
type encoder struct {
	embeddings []float32 // vocabRows × embedDim
	timing     []float32 // the inverse timescales of the timing signal
	layers     [2]layer
	normEps    float32 // layer norm epsilon
	head       *matrix // the tanh layer: modelDim → modelDim
	headBias   []float32
	l2Eps      float32 // floor of the squared norm before the final normalization
}

// weightSet reads named weights, collecting every shape mismatch.
type weightSet struct {
	w    map[string]tensor
	errs []error
}

// get returns the weight called name if it has the given shape (leading 1s, as in a
// 1×1 convolution kernel, are ignored).
func (s *weightSet) get(name string, shape ...int) []float32 {
	t, ok := s.w[name]
	if !ok {
		s.errs = append(s.errs, fmt.Errorf("model.json has no weight %s", name))
		return nil
	}
	got := t.shape
	for len(got) > len(shape) && got[0] == 1 {
		got = got[1:]
	}
	if !slices.Equal(got, shape) {
		s.errs = append(s.errs, fmt.Errorf("weight %s has shape %v, want %v", name, t.shape, shape))
		return nil
	}
	return t.data
}

func (s *weightSet) scalar(name string) float32 {
	if d := s.get(name); d != nil {
		return d[0]
	}
	return 0
}

func (s *weightSet) matrix(name string, k, n int) *matrix {
	if d := s.get(name, k, n); d != nil {
		return packMatrix(d, k, n)
	}
	return nil
}

// newEncoder picks the graph's weights by node name.
func newEncoder(weights map[string]tensor) (*encoder, error) {
	s := &weightSet{w: weights}
	e := &encoder{
		embeddings: s.get("module/Embeddings_en", vocabRows, embedDim),
		timing:     s.get(kona+"Encode/TransformerStack/Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1", 1, timingScales),
		normEps:    s.scalar(kona + "Encode/TransformerStack/Layer_1/TransformerLayer/FFN/layer_prepostprocess/layer_norm/Cast/x"),
		head:       s.matrix("module/Encoder_en/hidden_layers/tanh_layer_0/weights", modelDim, modelDim),
		headBias:   s.get("module/Encoder_en/hidden_layers/tanh_layer_0/bias", modelDim),
		l2Eps:      s.scalar("module_apply_default/Encoder_en/hidden_layers/l2_normalize/Maximum/y"),
	}
	for i, in := range []int{embedDim, modelDim} {
		v := fmt.Sprintf("%sEncode/Layer_%d/TransformerLayer/", kona, i)
		c := fmt.Sprintf("%sEncode/TransformerStack/Layer_%d/TransformerLayer/", kona, i)
		k := fmt.Sprintf("%sEncode/Layer_%d/TransformerLayer/", konaV, i)
		l := layer{
			in:        in,
			attnScale: s.get(v+"layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", in),
			attnBias:  s.get(v+"layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", in),
			qkv:       s.matrix(k+"MultiheadAttention/qkv_transform_single/kernel/part_0", in, 3*in),
			qkvBias:   s.get(v+"MultiheadAttention/qkv_transform_single/bias/ConcatPartitions/concat", 3*in),
			qScale:    s.scalar(c + "MultiheadAttention/mul/y"),
			out:       s.matrix(k+"MultiheadAttention/output_transform_single/kernel/part_0", in, modelDim),
			outBias:   s.get(v+"MultiheadAttention/output_transform_single/bias/ConcatPartitions/concat", modelDim),
			ffnScale:  s.get(v+"FFN/layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", modelDim),
			ffnBias:   s.get(v+"FFN/layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", modelDim),
			ffn1:      s.matrix(c+"FFN/conv1/Tensordot/Reshape_1", modelDim, ffnDim),
			ffn1Bias:  s.get(v+"FFN/conv1/bias/ConcatPartitions/concat", ffnDim),
			ffn2:      s.matrix(c+"FFN/conv2/Tensordot/Reshape_1", ffnDim, modelDim),
			ffn2Bias:  s.get(v+"FFN/conv2/bias/ConcatPartitions/concat", modelDim),
		}
		if in != modelDim {
			l.residual = s.matrix(v+"dense/kernel/ConcatPartitions/concat", in, modelDim)
			l.residualBias = s.get(v+"dense/bias/ConcatPartitions/concat", modelDim)
		}
		e.layers[i] = l
	}
	if err := joinErrors(s.errs); err != nil {
		return nil, err
	}
	return e, nil
}

func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("the model is not the expected graph: %w (and %d more)", errs[0], len(errs)-1)
}

// scratch holds the activations of one batch; a pool reuses it across calls.
type scratch struct {
	x, h, qkv, att, y, ffn, pooled, out []float32
	scores                              []float32
}

// grow returns buf resized to n values, reallocating only when it is too small.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// forward embeds a batch of token sequences (each 0..maxTokens ids) into dst, one
// modelDim vector per sequence, exactly as the graph does: the graph's padding never
// reaches a real position (its attention bias is -1e9, whose softmax weight is 0 in
// float32, and the pooling masks it), so each sequence is computed on its own rows.
func (e *encoder) forward(seqs [][]int32, dst [][]float32, s *scratch) {
	rows := 0
	for _, seq := range seqs {
		rows += len(seq)
	}
	s.x = grow(s.x, rows*modelDim)
	s.h = grow(s.h, rows*modelDim)
	s.qkv = grow(s.qkv, rows*3*modelDim)
	s.att = grow(s.att, rows*modelDim)
	s.y = grow(s.y, rows*modelDim)
	s.ffn = grow(s.ffn, rows*ffnDim)
	s.scores = grow(s.scores, maxTokens)

	// The first layer's input is the piece embedding plus the timing signal, added to
	// the piece embedding once more (the graph scatters the embeddings and adds them
	// to a copy that carries the signal).
	x := s.x[:rows*embedDim]
	r := 0
	for _, seq := range seqs {
		for pos, id := range seq {
			row := x[r*embedDim : (r+1)*embedDim]
			emb := e.embeddings[int(id)*embedDim : (int(id)+1)*embedDim]
			for c := 0; c < timingScales; c++ {
				angle := float64(float32(pos) * e.timing[c])
				row[c] = 2*emb[c] + float32(math.Sin(angle))
				row[timingScales+c] = 2*emb[timingScales+c] + float32(math.Cos(angle))
			}
			r++
		}
	}

	for i := range e.layers {
		l := &e.layers[i]
		in := l.in
		x := s.x[:rows*in]
		h := s.h[:rows*in]
		qkv := s.qkv[:rows*3*in]
		att := s.att[:rows*in]
		y := s.y[:rows*modelDim]

		layerNorm(h, x, rows, in, l.attnScale, l.attnBias, e.normEps)
		gemm(qkv, h, rows, l.qkv, l.qkvBias)
		start := 0
		for _, seq := range seqs {
			e.attend(att[start*in:], qkv[start*3*in:], len(seq), in, l.qScale, s.scores)
			start += len(seq)
		}
		gemm(y, att, rows, l.out, l.outBias)
		if l.residual != nil {
			// y (attention) + dense(x): the residual needs x, so the sum goes to x's
			// buffer only after the dense layer has read it.
			gemm(s.h, x, rows, l.residual, l.residualBias)
			x = s.x[:rows*modelDim]
			for j := range y {
				x[j] = y[j] + s.h[j]
			}
		} else {
			for j := range y {
				x[j] += y[j]
			}
		}
		x = s.x[:rows*modelDim]
		h = s.h[:rows*modelDim]
		layerNorm(h, x, rows, modelDim, l.ffnScale, l.ffnBias, e.normEps)
		gemm(s.ffn, h, rows, l.ffn1, l.ffn1Bias)
		for j, v := range s.ffn {
			s.ffn[j] = max(v, 0)
		}
		gemm(y, s.ffn, rows, l.ffn2, l.ffn2Bias)
		for j := range y {
			x[j] += y[j]
		}
	}

	// Mean over each sequence's positions (an empty one pools to zeros, as the
	// graph's max(length, 1) divisor gives), then the tanh layer and L2 normalization.
	n := len(seqs)
	s.pooled = grow(s.pooled, n*modelDim)
	s.out = grow(s.out, n*modelDim)
	clear(s.pooled)
	sum := make([]float64, modelDim)
	start := 0
	for t, seq := range seqs {
		p := s.pooled[t*modelDim : (t+1)*modelDim]
		clear(sum)
		for r := start; r < start+len(seq); r++ {
			for c, v := range s.x[r*modelDim : (r+1)*modelDim] {
				sum[c] += float64(v)
			}
		}
		div := float64(max(len(seq), 1))
		for c := range p {
			p[c] = float32(sum[c] / div)
		}
		start += len(seq)
	}
	gemm(s.out, s.pooled, n, e.head, e.headBias)
	for t := range seqs {
		v := s.out[t*modelDim : (t+1)*modelDim]
		var sq float64
		for c := range v {
			v[c] = float32(math.Tanh(float64(v[c])))
			sq += float64(v[c]) * float64(v[c])
		}
		inv := 1 / math.Sqrt(max(sq, float64(e.l2Eps)))
		out := make([]float32, modelDim)
		for c := range v {
			out[c] = float32(float64(v[c]) * inv)
		}
		dst[t] = out
	}
}

// attend is multi-head self-attention over one sequence of n rows: qkv holds each
// row's queries, keys and values (width in each), att receives the heads' outputs
// side by side.
func (e *encoder) attend(att, qkv []float32, n, in int, qScale float32, scores []float32) {
	d := in / heads
	q := make([]float32, d)
	for i := 0; i < n; i++ {
		for hd := 0; hd < heads; hd++ {
			qi := qkv[i*3*in+hd*d : i*3*in+(hd+1)*d]
			for c := range q {
				q[c] = qi[c] * qScale
			}
			peak := float32(math.Inf(-1))
			for j := 0; j < n; j++ {
				scores[j] = dot(q, qkv[j*3*in+in+hd*d:j*3*in+in+(hd+1)*d])
				peak = max(peak, scores[j])
			}
			var total float64
			for j := 0; j < n; j++ {
				w := math.Exp(float64(scores[j] - peak))
				scores[j] = float32(w)
				total += w
			}
			o := att[i*in+hd*d : i*in+(hd+1)*d]
			clear(o)
			for j := 0; j < n; j++ {
				w := float32(float64(scores[j]) / total)
				v := qkv[j*3*in+2*in+hd*d : j*3*in+2*in+(hd+1)*d]
				for c := range o {
					o[c] += w * v[c]
				}
			}
		}
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// layerNorm normalizes each of the first rows rows of x (width n) into dst:
// scale·(x−mean)/sqrt(var+eps) + bias.
func layerNorm(dst, x []float32, rows, n int, scale, bias []float32, eps float32) {
	for r := 0; r < rows; r++ {
		row := x[r*n : (r+1)*n]
		var sum float64
		for _, v := range row {
			sum += float64(v)
		}
		mean := sum / float64(n)
		var sq float64
		for _, v := range row {
			d := float64(v) - mean
			sq += d * d
		}
		inv := 1 / math.Sqrt(sq/float64(n)+float64(eps))
		out := dst[r*n : (r+1)*n]
		for c, v := range row {
			out[c] = float32((float64(v)-mean)*inv)*scale[c] + bias[c]
		}
	}
}
