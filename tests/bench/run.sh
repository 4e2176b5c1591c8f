#!/bin/sh
echo bench
