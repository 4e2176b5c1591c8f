/* kernels-arm.h - shared helpers of the aarch64 kernels. */
