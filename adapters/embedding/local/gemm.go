package local

// The matrix products are the encoder's cost (about 4.7 million multiply-adds per
// token), so the weights are packed once, at load, into panels of panelWidth columns
// that a register-blocked kernel streams: blockRows rows of the input times one panel
// per call. On amd64 with AVX2 and FMA the kernel is assembly (gemm_amd64.s); anywhere
// else it is the portable Go loop below, which computes the same sums.

const (
	panelWidth = 16 // columns per packed panel: two 8-wide AVX registers
	blockRows  = 6  // input rows per kernel call: 12 accumulator registers (fewer at the end)
)

// matrix is a k×n weight matrix packed panel by panel: panel p holds columns
// [p·16, p·16+16) as k consecutive rows of 16 values.
type matrix struct {
	k, n   int
	packed []float32
}

// packMatrix packs the row-major k×n matrix w; n must be a multiple of panelWidth
// (every weight of the graph is).
func packMatrix(w []float32, k, n int) *matrix {
	if n%panelWidth != 0 {
		panic("local: matrix width is not a multiple of the panel width")
	}
	m := &matrix{k: k, n: n, packed: make([]float32, k*n)}
	for p := 0; p < n/panelWidth; p++ {
		panel := m.packed[p*k*panelWidth : (p+1)*k*panelWidth]
		for r := 0; r < k; r++ {
			copy(panel[r*panelWidth:(r+1)*panelWidth], w[r*n+p*panelWidth:r*n+(p+1)*panelWidth])
		}
	}
	return m
}

// blockOf is the rows of the next kernel call when rows are left: a whole block while
// one is left, then 4, 2 and 1, so that a product computes no row it was not asked
// for (a question of 13 pieces is 13 rows, not 18).
func blockOf(rows int) int {
	switch {
	case rows >= blockRows:
		return blockRows
	case rows >= 4:
		return 4
	case rows >= 2:
		return 2
	}
	return 1
}

// gemm sets dst (rows × w.n) to a (rows × w.k) times w, plus bias on every row.
func gemm(dst, a []float32, rows int, w *matrix, bias []float32) {
	_ = dst[rows*w.n-1]
	_ = a[rows*w.k-1]
	for p := 0; p < w.n/panelWidth; p++ {
		panel := w.packed[p*w.k*panelWidth : (p+1)*w.k*panelWidth]
		for r := 0; r < rows; {
			m := blockOf(rows - r)
			kernel(m, a[r*w.k:], w.k, panel, dst[r*w.n+p*panelWidth:], w.n)
			r += m
		}
	}
	for r := 0; r < rows; r++ {
		row := dst[r*w.n : (r+1)*w.n]
		for c, b := range bias {
			row[c] += b
		}
	}
}

// kernelGo is the portable kernel: c[i·ldc+j] = Σₖ a[i·lda+k]·b[k·16+j] for the m
// rows i and the panelWidth columns j.
func kernelGo(m int, a []float32, lda int, b []float32, k int, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		var acc [panelWidth]float32
		row := a[i*lda : i*lda+k]
		for kk, v := range row {
			bk := (*[panelWidth]float32)(b[kk*panelWidth : (kk+1)*panelWidth])
			for j := range acc {
				acc[j] += v * bk[j]
			}
		}
		copy(c[i*ldc:i*ldc+panelWidth], acc[:])
	}
}
