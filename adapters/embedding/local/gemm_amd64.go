package local

import "golang.org/x/sys/cpu"

// hasFMA reports whether the assembly kernel can run here.
var hasFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kernel6x16FMA is kernelGo in AVX2/FMA assembly, on raw pointers.
//
//go:noescape
func kernel6x16FMA(a *float32, lda int, b *float32, k int, c *float32, ldc int)

// kernel runs one blockRows × panelWidth block of a product.
func kernel(a []float32, lda int, b []float32, c []float32, ldc int) {
	k := len(b) / panelWidth
	if hasFMA {
		_ = a[(blockRows-1)*lda+k-1]
		_ = c[(blockRows-1)*ldc+panelWidth-1]
		kernel6x16FMA(&a[0], lda, &b[0], k, &c[0], ldc)
		return
	}
	kernelGo(a, lda, b, k, c, ldc)
}
