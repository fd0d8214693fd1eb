declare module 'sluice:actor/batch@0.1.0' {
  /**
   * Loops `env = turns.next(done)` until it returns `none`, `done = handle(env)` between.
   */
  export function run(): void;
}
