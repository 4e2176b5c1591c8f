/* kernels-x86.h - shared helpers of the x86-64 kernels. */
