export * from './ping';
