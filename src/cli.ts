#!/usr/bin/env node
import { runCli } from './lib/cli/main.js';
import { processIo } from './lib/cli/io.js';

process.exitCode = await runCli(process.argv.slice(2), processIo());
