#!/usr/bin/env node
import { runCli } from './tools/cli/main.js';
import { processIo } from './tools/cli/io.js';

process.exitCode = await runCli(process.argv.slice(2), processIo());
