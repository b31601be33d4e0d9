#!/bin/sh
# Regenerates the pictures of docs/layouts.md (needs clayout[plot]):
#   sh docs/img/make.sh
set -e
cd "$(dirname "$0")"
show() { python -m runtime show "$1" --dims "$2" -o "$1.png"; }
show in_out_channel 1,6,3,5
show in_out_height 1,3,5,2
show in_out_width 1,3,2,5
show conv2d_filter 6,3,2,2
show dw_conv2d_filter 2,6,2,2
show argument 6
show weight_height 6,3,2,2
show weight_width 6,3,2,2
show image_2d_weights_c4_fyx_b 3,5,1,2
show image_2d_weights_c1_b_fyx 3,2,2,2
show texture_2d 1,6,3,5
show winograd_2x3_mace 2,5,3,3
show winograd_4x3_mace 1,5,3,3
show winograd_2x3_mnn 5,3,3,3
show winograd_2x5_mnn 2,3,5,5
show winograd_4x3_tflite 5,1,3,3
show image_2d_weights_winograd_6x3_s1_fbxyb 16,1,3,3
show image_2d_weights_winograd_6x3_s1_xfbyb 16,2,3,3
# TFLite GPU's storages (docs/layouts.md, docs/storage.md)
show tflite_buffer 1,6,3,5
show tflite_image_buffer 1,6,3,5
show tflite_texture_2d 1,6,3,5
show tflite_single_texture_2d 1,3,3,5
show tflite_texture_array 1,6,3,5
show tflite_texture_3d 1,6,3,5
# other engines' layouts (docs/engine-layouts.md)
show tvm_texture 1,6,3,5
show tvm_texture_nhwc 1,6,3,5
show tvm_texture_weight 6,3,2,2
show tvm_texture_array 1,6,3,5
show tvm_texture_nhwc_array 2,6,3,5
show tinygrad_image 1,6,3,5
show tinygrad_conv_weight 6,3,2,2
show acl_nhwc_image 1,6,3,5
show acl_ohwi_image 6,3,2,2
python frame_path.py
