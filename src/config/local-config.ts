/** The names of local mode's two settings; src/local/home.ts reads them. */

/** The variable that turns local mode off (`0`, `false`, `off`, `no`): the CLI then connects to the default address. */
export const IMAGEBATCH_LOCAL_ENV = 'IMAGEBATCH_LOCAL';

/** The variable that names local mode's home. */
export const IMAGEBATCH_HOME_ENV = 'IMAGEBATCH_HOME';
