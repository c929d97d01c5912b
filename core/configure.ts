// The config loader with lb's own sections bound: the plugin registry
// (plugins/index.ts) and the [generation] checker (core/gen/config.ts). The
// loader (core/config/load.ts) is handed them and imports neither, so the
// config layer depends on nothing above it; programs and tests load configs
// through this module.
import { checkGeneration } from './gen/config.js'
import { checkPluginConf, loadPluginModules } from '../plugins/index.js'
import * as load from './config/load.js'
import type { Config, ConfigSections, RawOverlay } from './config/load.js'

export type { Config, RawOverlay } from './config/load.js'

export const SECTIONS: ConfigSections = { generation: checkGeneration, plugin: checkPluginConf, loadPlugins: loadPluginModules }

export const buildConfig = (raw: unknown, file: string): Config => load.buildConfig(raw, file, SECTIONS)
export const parseConfig = (text: string, file = '', overlay?: RawOverlay): Config => load.parseConfig(text, file, SECTIONS, overlay)
export const loadConfig = (path: string, overlay?: RawOverlay): Config => load.loadConfig(path, SECTIONS, overlay)
/** loadConfig, after importing the third-party plugin modules the file's middlewares name (import() is async; validation stays sync). */
export const loadConfigAsync = (path: string, overlay?: RawOverlay): Promise<Config> => load.loadConfigAsync(path, SECTIONS, overlay)
